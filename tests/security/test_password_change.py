"""Issue 16, tokens and passwords: a new password revokes the API tokens made with the old one, on every path
that sets a password, and the page that changed it says so; a hash upgraded at sign-in is not a change."""

import pytest
from django.contrib.auth import authenticate
from django.core.management import call_command
from django.test import RequestFactory
from knox.models import AuthToken
from rest_framework.test import APIClient

pytestmark = pytest.mark.django_db

NEW = "correct-horse-battery-2026"


def _tokens(user, count: int) -> list[str]:
    return [AuthToken.objects.create(user)[1] for _ in range(count)]


def _works(token: str) -> bool:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    return client.get("/api/v1/teams/").status_code == 200


def test_changing_your_password_revokes_your_api_tokens_and_the_page_says_so(client, cast):
    mine, theirs = _tokens(cast["researcher"], 2), _tokens(cast["lead"], 1)
    client.force_login(cast["researcher"])
    form = client.get("/accounts/password_change/").content.decode()
    assert 'class="brand"' in form and "revokes every API token" in form
    done = client.post(
        "/accounts/password_change/",
        {"old_password": "pw", "new_password1": NEW, "new_password2": NEW},
        follow=True,
    )
    assert done.redirect_chain[-1][0] == "/accounts/password_change/done/"
    assert "2 API tokens of your account revoked" in done.content.decode()
    assert not any(_works(token) for token in mine)
    assert _works(theirs[0])
    assert client.get("/").status_code == 200, "this browser stays signed in"


def test_an_admin_setting_a_password_revokes_the_users_tokens_and_the_admin_says_so(client, cast):
    token = _tokens(cast["researcher"], 1)[0]
    client.force_login(cast["admin"])
    answer = client.post(
        f"/admin/auth/user/{cast['researcher'].pk}/password/",
        {"usable_password": "true", "password1": NEW, "password2": NEW},
        follow=True,
    )
    assert "1 API token of rita revoked" in answer.content.decode()
    assert not _works(token)


def test_the_changepassword_command_and_code_that_sets_a_password_revoke_too(cast, monkeypatch):
    token = _tokens(cast["researcher"], 1)[0]
    monkeypatch.setattr("getpass.getpass", lambda prompt="": NEW)
    call_command("changepassword", "rita")
    assert not _works(token)
    token = _tokens(cast["lead"], 1)[0]
    cast["lead"].set_password(NEW)
    cast["lead"].save()
    assert not _works(token)


def test_a_password_hash_upgraded_at_sign_in_keeps_the_tokens(cast, settings):
    token = _tokens(cast["researcher"], 1)[0]
    settings.PASSWORD_HASHERS = [
        "django.contrib.auth.hashers.ScryptPasswordHasher",  # preferred now: the MD5 hash is rewritten
        "django.contrib.auth.hashers.MD5PasswordHasher",
    ]
    request = RequestFactory().post("/accounts/login/")
    assert authenticate(request, username="rita", password="pw") is not None
    cast["researcher"].refresh_from_db()
    assert cast["researcher"].password.startswith("scrypt$")
    assert _works(token)
