"""Issue 16, brute force: repeated wrong passwords lock an account, and an address, out of the sign-in form
and the API's token endpoint, with a message saying until when; an admin can unlock."""

import base64
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.test import Client
from rest_framework.test import APIClient

pytestmark = pytest.mark.django_db

LOGIN = "/accounts/login/"
TOKENS = "/api/v1/auth/tokens/"


def _sign_in(client: Client, username: str, password: str, address: str = "10.0.0.1"):
    return client.post(LOGIN, {"username": username, "password": password}, REMOTE_ADDR=address)


def _basic(username: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{username}:{password}".encode()).decode()


def _token(username: str, password: str, address: str = "10.0.0.1"):
    return APIClient().post(TOKENS, HTTP_AUTHORIZATION=_basic(username, password), REMOTE_ADDR=address)


def test_the_sign_in_form_locks_an_account_out_and_says_until_when_in_the_site_layout(client, cast, settings):
    answers = [_sign_in(client, "rita", f"guess-{n}").status_code for n in range(settings.AXES_FAILURE_LIMIT - 1)]
    assert answers == [200] * (settings.AXES_FAILURE_LIMIT - 1)  # the form again, "didn't match"
    locked = _sign_in(client, "rita", "guess-last")
    assert locked.status_code == 429 and int(locked["Retry-After"]) == 15 * 60
    page = locked.content.decode()
    assert 'id="lockout-message"' in page and "locked until" in page and "ask a portal admin" in page
    assert 'class="brand"' in page, "the lockout page uses the site's layout"
    still = _sign_in(client, "rita", "pw")
    assert still.status_code == 429 and "_auth_user_id" not in client.session


def test_a_username_is_locked_out_from_every_address(client, cast, settings):
    for n in range(settings.AXES_FAILURE_LIMIT):
        _sign_in(client, "rita", "wrong", address=f"10.0.1.{n}")
    assert _sign_in(client, "rita", "pw", address="10.0.2.1").status_code == 429


def test_wrong_passwords_for_made_up_names_lock_out_no_existing_account_behind_one_address(client, cast, settings):
    # Issue 29 item 5: behind one proxy address, an anonymous client locked out alice, bob, lead and admin.
    for n in range(4 * settings.AXES_FAILURE_LIMIT):
        _sign_in(Client(), f"nobody-{n % 7}", "wrong", address="10.0.3.1")
    for name in ("leo", "rita", "ada"):
        assert _sign_in(Client(), name, "pw", address="10.0.3.1").status_code == 302, name
    assert _token("otto", "pw", address="10.0.3.1").status_code == 200


def test_a_guess_at_a_locked_account_does_not_renew_its_lockout(cast, settings):
    from axes.models import AccessAttempt
    from django.utils import timezone

    for _ in range(settings.AXES_FAILURE_LIMIT):
        _token("rita", "wrong")
    AccessAttempt.objects.filter(username="rita").update(attempt_time=timezone.now() - timedelta(minutes=10))
    again = _token("rita", "wrong")
    assert again.status_code == 429 and int(again["Retry-After"]) <= 5 * 60  # still the first lockout's end


def test_signing_in_to_ones_own_account_does_not_clear_the_failures_counted_for_another(client, cast, settings):
    for _ in range(settings.AXES_FAILURE_LIMIT - 1):
        _sign_in(Client(), "rita", "guess")
    assert _sign_in(Client(), "otto", "pw").status_code == 302  # the attacker's own account
    assert _sign_in(client, "rita", "guess").status_code == 429


def test_the_token_endpoint_locks_out_with_json_saying_when_to_retry(cast, settings):
    answers = [_token("rita", "wrong").status_code for _ in range(settings.AXES_FAILURE_LIMIT - 1)]
    assert answers == [401] * (settings.AXES_FAILURE_LIMIT - 1)
    for password in ("wrong", "pw"):  # the right password does not help while locked out
        locked = _token("rita", password)
        assert locked.status_code == 429 and int(locked["Retry-After"]) == 15 * 60
        assert "locked until" in locked.json()["detail"] and "ask a portal admin" in locked.json()["detail"]


def test_without_a_cool_off_only_an_admin_unlocks_and_the_api_says_so_with_a_403(client, cast, settings):
    settings.AXES_COOLOFF_TIME = None
    for _ in range(settings.AXES_FAILURE_LIMIT):
        _token("rita", "wrong")
    refused = _token("rita", "pw")
    assert refused.status_code == 403 and "Retry-After" not in refused
    assert refused.json()["detail"].endswith("ask a portal admin to unlock it.")
    assert _sign_in(client, "rita", "pw").status_code == 403
    call_command("axes_reset_username", "rita")
    call_command("axes_reset_ip", "10.0.0.1")
    assert _token("rita", "pw").status_code == 200
    assert _sign_in(client, "rita", "pw").status_code == 302


def test_admins_see_and_clear_the_attempts_in_the_admin(client, cast, settings):
    for _ in range(settings.AXES_FAILURE_LIMIT):
        _sign_in(Client(), "rita", "wrong")
    client.force_login(cast["admin"])
    listing = client.get("/admin/axes/accessattempt/")
    assert listing.status_code == 200 and "rita" in listing.content.decode()


def test_the_test_client_still_signs_in_with_a_password(client, cast):
    assert client.login(username="rita", password="pw")
    assert not client.login(username="rita", password="wrong")
