"""LDAP sign-in against a real slapd: users created at the first sign-in, memberships from group mappings,
re-synced at sign-in and by the periodic task, hand-made memberships and local accounts left alone."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse

from scheduling.models import ExternalIdentity, Membership, Team
from scheduling.services import directory as directory_service
from scheduling.tasks import resync_identities
from tests.identity.support import roles_of

pytestmark = [pytest.mark.live, pytest.mark.django_db]



def sign_in(client, username: str, password: str):
    return client.post(reverse("login"), {"username": username, "password": password})



def test_the_first_ldap_sign_in_creates_the_user_with_the_mapped_teams(client, ldap_signin, mapped_teams):
    response = sign_in(client, "alice", "secret-alice")
    assert response.status_code == 302 and response.url == reverse("overview")
    alice = get_user_model().objects.get(username="alice")
    assert (alice.email, alice.first_name, alice.has_usable_password()) == ("alice@gpuportal.test", "Alice", False)
    assert roles_of("alice") == {"vision": ("lead", "mapping")}  # leads and users both match: the lead wins
    identity = ExternalIdentity.objects.get(user=alice)
    assert (identity.provider, identity.groups) == ("ldap", ["gpu-vision-leads", "gpu-vision-users"])


def test_a_wrong_ldap_password_signs_nobody_in(client, ldap_signin, mapped_teams):
    response = sign_in(client, "bob", "not-bobs")
    assert response.status_code == 200 and "_auth_user_id" not in client.session
    assert not get_user_model().objects.filter(username="bob").exists()


def test_a_user_removed_from_a_group_loses_the_team_at_the_next_sign_in(client, ldap_signin, mapped_teams, directory):
    sign_in(client, "bob", "secret-bob")
    assert roles_of("bob") == {"vision": ("researcher", "mapping"), "nlp": ("researcher", "mapping")}
    directory.remove_member("nlp", "bob")
    client.logout()
    sign_in(client, "bob", "secret-bob")
    assert roles_of("bob") == {"vision": ("researcher", "mapping")}
    removal = Membership.history.filter(user__username="bob", team__slug="nlp", history_type="-").get()
    assert removal.history_change_reason == "ldap group sync; groups: gpu-vision-users"


def test_the_periodic_resync_removes_access_without_a_sign_in(client, ldap_signin, mapped_teams, directory):
    sign_in(client, "carol", "secret-carol")
    assert roles_of("carol") == {"nlp": ("researcher", "mapping")}
    directory.remove_member("nlp", "carol")
    directory.add_member("gpu-vision-leads", "carol")
    assert resync_identities.apply().get() == {"ldap": 1, "oidc": 0, "failed": 0}
    assert roles_of("carol") == {"vision": ("lead", "mapping")}


def test_a_membership_an_admin_typed_in_survives_every_sync(client, ldap_signin, mapped_teams, directory):
    sign_in(client, "carol", "secret-carol")
    carol = get_user_model().objects.get(username="carol")
    ops = Team.objects.create(slug="ops", name="Ops")
    Membership.objects.create(user=carol, team=ops, role=Membership.Role.LEAD)  # source: manual
    Membership.objects.filter(user=carol, team=mapped_teams["nlp"]).update(source=Membership.Source.MANUAL)
    directory.remove_member("nlp", "carol")
    directory_service.resync_identities()
    assert roles_of("carol") == {"ops": ("lead", "manual"), "nlp": ("researcher", "manual")}


def test_a_directory_that_fails_during_a_resync_changes_nothing(client, ldap_signin, mapped_teams, settings):
    sign_in(client, "bob", "secret-bob")
    before = roles_of("bob")
    settings.AUTH_LDAP_SERVER_URI = "ldap://127.0.0.1:26388"  # nothing listens there
    assert directory_service.resync_identities() == {"ldap": 0, "oidc": 0, "failed": 1}
    assert roles_of("bob") == before and before


def test_a_local_account_still_signs_in_with_ldap_on(client, ldap_signin, django_user_model):
    django_user_model.objects.create_user("breakglass", password="local-pw-123")
    response = sign_in(client, "breakglass", "local-pw-123")
    assert response.status_code == 302
    assert not ExternalIdentity.objects.exists()


def test_a_directory_entry_never_takes_over_a_local_account_of_the_same_name(client, ldap_signin, django_user_model):
    local = django_user_model.objects.create_user("bob", password="local-pw-123", is_superuser=True)
    response = sign_in(client, "bob", "secret-bob")  # bob's directory password, not the local one
    assert response.status_code == 200 and "_auth_user_id" not in client.session
    assert not Membership.objects.filter(user=local).exists() and not ExternalIdentity.objects.exists()
