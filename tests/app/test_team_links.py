"""Pages link only the team pages the user may open: the overview linked every team, and a researcher got
a 404 on five of six links."""

import re

import pytest
from django.urls import reverse

pytestmark = pytest.mark.django_db


def _linked_and_named(body: str, teams) -> tuple[set[str], set[str]]:
    linked = set(re.findall(r'href="/teams/([\w-]+)/"', body))
    named = {t.slug for t in teams.values() if t.name in body}
    return linked, named


@pytest.mark.parametrize("role", ["researcher", "lead", "outsider", "admin"])
def test_every_team_link_on_the_overview_opens_and_every_team_is_still_named(client, cast, teams, role):
    client.force_login(cast[role])
    body = client.get(reverse("overview")).content.decode()
    linked, named = _linked_and_named(body, teams)
    assert named == set(teams)  # every team is still listed by name
    for slug in linked:
        assert client.get(reverse("team-detail", args=[slug])).status_code == 200, (role, slug)
    closed = {slug for slug in teams if client.get(reverse("team-detail", args=[slug])).status_code == 404}
    assert linked == set(teams) - closed
    if role != "admin":
        assert closed  # each of these roles has a team it may not open
