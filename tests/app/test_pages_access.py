"""Every page for every role: researcher, lead, admin, outsider and anonymous visitors."""

import re

import pytest
from django.urls import reverse

from scheduling.services import quota

from .test_pages_support import build_site

pytestmark = pytest.mark.django_db

EVERYONE = ("researcher", "lead", "admin", "outsider")
OPEN_PAGES = ("overview", "team-list", "fragmentation", "utilisation", "quota-list", "quota-new")
ADMIN_PAGES = ("fairshare", "fairshare-history", "orchestrators")


@pytest.fixture
def site(orchestrator, fleet, teams, queues, cast, period):
    data = build_site(orchestrator, fleet, teams)
    start, end = period
    data["request"] = quota.create_request(
        requester=cast["researcher"], team=teams["nlp"], gpus=8, starts_at=start, ends_at=end, justification="ICML"
    )
    return data


def _get(client, user, url):
    if user is not None:
        client.force_login(user)
    return client.get(url)


@pytest.mark.parametrize("page", OPEN_PAGES + ADMIN_PAGES)
def test_anonymous_visitors_are_sent_to_log_in_from_every_page(client, site, page):
    response = client.get(reverse(page))
    assert response.status_code == 302 and response["Location"].startswith(reverse("login"))


@pytest.mark.parametrize("role", EVERYONE)
@pytest.mark.parametrize("page", OPEN_PAGES)
def test_every_signed_in_role_sees_the_fleet_pages(client, site, cast, role, page):
    assert _get(client, cast[role], reverse(page)).status_code == 200


@pytest.mark.parametrize("role", ("researcher", "lead", "outsider"))
@pytest.mark.parametrize("page", ADMIN_PAGES)
def test_only_admins_reach_the_governance_pages(client, site, cast, role, page):
    assert _get(client, cast[role], reverse(page)).status_code == 403


@pytest.mark.parametrize("page", ADMIN_PAGES)
def test_admins_reach_the_governance_pages(client, site, cast, page):
    assert _get(client, cast["admin"], reverse(page)).status_code == 200


@pytest.mark.parametrize(("role", "status"), [("researcher", 200), ("lead", 200), ("admin", 200), ("outsider", 404)])
def test_a_team_page_is_404_for_people_outside_the_team(client, site, cast, role, status):
    assert _get(client, cast[role], reverse("team-detail", args=["nlp"])).status_code == status


def test_a_researcher_cannot_see_a_sibling_teams_page(client, site, cast):
    assert _get(client, cast["researcher"], reverse("team-detail", args=["production"])).status_code == 404
    assert _get(client, cast["researcher"], reverse("team-detail", args=["no-such-team"])).status_code == 404


@pytest.mark.parametrize(("role", "status"), [("researcher", 200), ("lead", 200), ("admin", 200), ("outsider", 404)])
def test_a_quota_request_is_404_for_an_outsider_guessing_its_id(client, site, cast, role, status):
    assert _get(client, cast[role], reverse("quota-detail", args=[site["request"].pk])).status_code == status


def test_the_team_list_shows_only_the_teams_a_researcher_may_see(client, site, cast):
    body = _get(client, cast["researcher"], reverse("team-list")).content.decode()
    assert 'href="/teams/nlp/"' in body and 'href="/teams/production/"' not in body
    body = _get(client, cast["lead"], reverse("team-list")).content.decode()
    assert 'href="/teams/nlp/"' in body and 'href="/teams/research/"' in body
    assert 'href="/teams/production/"' not in body


def test_the_team_list_filters_and_sorts(client, site, cast):
    client.force_login(cast["admin"])
    body = client.get(reverse("team-list"), {"q": "prod"}).content.decode()
    assert "/teams/production/" in body and "/teams/nlp/" not in body
    body = client.get(reverse("team-list"), {"sort": "-allocated"}).content.decode()
    assert body.index("/teams/research/") < body.index("/teams/production/")  # 8 GPUs (via nlp) before 3


def test_the_quota_list_shows_an_outsider_nothing_of_other_teams(client, site, cast):
    body = _get(client, cast["outsider"], reverse("quota-list")).content.decode()
    assert f"/quota/{site['request'].pk}/" not in body


def test_a_lead_sees_requests_awaiting_their_decision(client, site, cast):
    body = _get(client, cast["lead"], reverse("quota-list")).content.decode()
    assert "Awaiting your decision" in body and f"/quota/{site['request'].pk}/" in body
    body = _get(client, cast["researcher"], reverse("quota-list")).content.decode()
    assert "Awaiting your decision" not in body


def test_the_navigation_offers_admin_pages_to_admins_only(client, site, cast):
    assert reverse("fairshare") in _get(client, cast["admin"], reverse("overview")).content.decode()
    assert reverse("fairshare") not in _get(client, cast["lead"], reverse("overview")).content.decode()


@pytest.mark.parametrize("page", ("overview", "fragmentation", "utilisation"))
def test_history_pages_have_a_time_range_selector_and_a_permalink(client, site, cast, page):
    body = _get(client, cast["researcher"], reverse(page)).content.decode()
    assert 'name="range"' in body and "Permalink" in body
    link = re.search(r'class="permalink" href="\?([^"]+)"', body).group(1)
    assert "range=" in link and "end=" in link
