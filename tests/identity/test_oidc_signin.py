"""OIDC sign-in against a real provider process (django-oauth-toolkit, scripts/oidc/start.sh): the portal's
redirect, the person's sign-in at the provider, and the portal's code exchange (token, JWKS, userinfo) all over
real HTTP; memberships from the ``groups`` claim through the same mappings as LDAP."""

from __future__ import annotations

from urllib.parse import urlsplit

import httpx
import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse

from scheduling.models import ExternalIdentity, GroupMapping, Membership
from scheduling.services import directory as directory_service
from tests.identity.support import roles_of

pytestmark = [pytest.mark.live, pytest.mark.django_db]



def sign_in_at_provider(client, provider: dict, username: str, password: str):
    """The whole code flow: portal -> provider's authorize (signing in there) -> the portal's callback."""
    start = client.get(reverse("oidc_authentication_init"))
    assert start.status_code == 302 and start.url.startswith(provider["OIDC_AUTHORIZATION_ENDPOINT"])
    assert "code_challenge=" in start.url  # PKCE
    with httpx.Client(timeout=30) as browser:
        login_url = provider["OIDC_LOGIN_URL"]
        page = browser.get(login_url)
        authorize = urlsplit(start.url)
        signed_in = browser.post(
            login_url,
            data={
                "username": username,
                "password": password,
                "csrfmiddlewaretoken": page.cookies["provider_csrftoken"],
                "next": f"{authorize.path}?{authorize.query}",
            },
            headers={"Referer": login_url},
        )
        assert signed_in.status_code == 302, signed_in.text[:500]
        authorized = browser.get(httpx.URL(login_url).join(signed_in.headers["location"]))
        assert authorized.status_code == 302, authorized.text[:500]
        callback = urlsplit(authorized.headers["location"])
    assert callback.path == reverse("oidc_authentication_callback")
    return client.get(f"{callback.path}?{callback.query}")



def test_the_first_oidc_sign_in_creates_the_user_with_the_teams_of_its_groups_claim(client, oidc_signin, mapped_teams):
    response = sign_in_at_provider(client, oidc_signin, "alice", "secret-alice")
    assert response.status_code == 302 and response.url == reverse("overview")
    alice = get_user_model().objects.get(username="alice")
    assert client.session["_auth_user_id"] == str(alice.pk)
    assert alice.email == "alice@gpuportal.test" and not alice.has_usable_password()
    assert roles_of("alice") == {"vision": ("lead", "mapping")}
    identity = ExternalIdentity.objects.get(user=alice)
    assert identity.provider == "oidc" and identity.groups == ["gpu-vision-leads", "gpu-vision-users"]


def test_a_group_removed_at_the_provider_is_lost_at_the_next_sign_in(client, oidc_signin, mapped_teams):
    sign_in_at_provider(client, oidc_signin, "bob", "secret-bob")
    assert roles_of("bob") == {"vision": ("researcher", "mapping"), "nlp": ("researcher", "mapping")}
    oidc_signin["move_groups"]("bob", ["nlp"])
    try:
        client.logout()
        sign_in_at_provider(client, oidc_signin, "bob", "secret-bob")
        assert roles_of("bob") == {"nlp": ("researcher", "mapping")}
        assert get_user_model().objects.filter(username="bob").count() == 1  # the same user (sub), not a new one
    finally:
        oidc_signin["move_groups"]("bob", ["gpu-vision-users", "nlp"])


def test_a_mapping_change_reaches_oidc_users_at_the_periodic_resync(client, oidc_signin, mapped_teams):
    sign_in_at_provider(client, oidc_signin, "carol", "secret-carol")
    assert roles_of("carol") == {"nlp": ("researcher", "mapping")}
    GroupMapping.objects.filter(pattern="nlp").update(role=Membership.Role.LEAD)
    assert directory_service.resync_identities() == {"ldap": 0, "oidc": 1, "failed": 0}
    assert roles_of("carol") == {"nlp": ("lead", "mapping")}


def test_an_oidc_user_never_takes_over_a_local_account_of_the_same_name(client, oidc_signin, mapped_teams):
    local = get_user_model().objects.create_user("carol", password="break-glass-pw")
    sign_in_at_provider(client, oidc_signin, "carol", "secret-carol")
    signed_in = get_user_model().objects.get(pk=client.session["_auth_user_id"])
    assert signed_in != local and signed_in.username.startswith("oidc-")
    assert not Membership.objects.filter(user=local).exists()


def test_the_login_page_offers_the_provider_only_when_oidc_is_on(client, settings):
    settings.OIDC_RP_CLIENT_ID = ""
    assert b"Sign in with your institution" not in client.get(reverse("login")).content
    assert client.get(reverse("oidc_authentication_init")).status_code == 404
    settings.OIDC_RP_CLIENT_ID = "gpuportal"
    assert b"Sign in with your institution" in client.get(reverse("login")).content
