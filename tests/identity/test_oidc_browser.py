"""OIDC sign-in as a person does it, in real Chromium: the portal's sign-in page, the provider's form, back
to the portal signed in with the teams of the groups claim."""

from __future__ import annotations

import pytest

from tests.identity.support import roles_of

pytestmark = [pytest.mark.live, pytest.mark.browser]


def test_a_person_signs_in_with_the_institution_button_and_lands_in_their_team(
    session, live_server, oidc_signin, mapped_teams
):
    person = session()
    person.base_url = live_server.url.replace("localhost", "127.0.0.1")  # a loopback callback (RFC 8252)
    page = person.go("/accounts/login/")
    page.get_by_role("link", name="Sign in with your institution").click()
    page.wait_for_url(oidc_signin["OIDC_LOGIN_URL"] + "**")
    page.get_by_label("Username").fill("alice")
    page.get_by_label("Password").fill("secret-alice")
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(person.base_url + "/")
    assert "alice" in page.content()
    assert roles_of("alice") == {"vision": ("lead", "mapping")}
    assert not person.errors
