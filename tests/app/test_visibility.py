"""Who sees what, in agreement: for every role and every kind of object, the page list, the API list and the
rule (``scheduling/rules.py``) give the same answer (``selectors/access.py`` is what pages and API ask)."""

import pytest
from django.urls import reverse
from knox.models import AuthToken
from rest_framework.test import APIClient

from scheduling.models import QuotaRequest, Team, WhatIfScenario, Workload
from scheduling.rules import is_lead, is_portal_admin
from scheduling.selectors import access
from scheduling.services import report_delivery
from tests.reports.conftest import WEEK, week  # noqa: F401  (the report fixture: a week of recorded work)

pytestmark = pytest.mark.django_db

ROLES = ("admin", "lead", "nlp_lead", "researcher", "outsider")


@pytest.fixture
def objects(cast, teams, orchestrator, period):
    start, end = period
    users = cast

    def request(who, team):
        return QuotaRequest.objects.create(
            requester=users[who],
            team=teams[team],
            gpus=2,
            starts_at=start,
            ends_at=end,
            justification="x",
            state=QuotaRequest.State.SUBMITTED,
        )

    requests = [
        request("researcher", "nlp"),
        request("lead", "research"),
        request("outsider", "production"),
        request("researcher", "production"),  # filed where the researcher is no member: still theirs to see
    ]
    scenarios = [
        WhatIfScenario.objects.create(name=name, created_by=users[who], team=teams.get(team))
        for name, who, team in [
            ("fleet", "admin", None),
            ("research", "lead", "research"),
            ("nlp", "nlp_lead", "nlp"),
            ("production", "admin", "production"),
            ("mine", "outsider", None),
        ]
    ]
    workloads = [
        Workload.objects.create(
            orchestrator=orchestrator,
            external_id=f"w-{slug}",
            team=teams.get(slug),
            submitted_at=start,
            state=Workload.State.PENDING,
        )
        for slug in ("research", "nlp", "production", None)
    ]
    return requests, scenarios, workloads


def _api(user) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {AuthToken.objects.create(user)[1]}")
    return client


def _api_list(client: APIClient, url: str) -> list[dict]:
    rows: list[dict] = []
    while url:
        page = client.get(url).json()
        rows += page["results"]
        url = page.get("next")
    return rows


def _allowed(user, perm: str, items, key=lambda item: item.pk) -> set:
    """What the rule says: the items ``user`` has ``perm`` on."""
    return {key(item) for item in items if user.has_perm(perm, item)}


def _page(client, user, name: str):
    client.force_login(user)
    response = client.get(reverse(name))
    assert response.status_code == 200
    return response.context


def test_the_team_tree_is_read_in_one_query_and_walked_parents_first(teams, django_assert_num_queries):
    speech = Team.objects.create(slug="speech", name="Speech", parent=teams["nlp"])
    with django_assert_num_queries(1):
        tree = Team.objects.tree()
    walked = [(team.slug, depth) for team, depth in tree.walk()]
    assert walked == [("production", 0), ("research", 0), ("nlp", 1), ("speech", 2)]
    assert set(tree.subtree(teams["research"].pk)) == {teams["research"].pk, teams["nlp"].pk, speech.pk}
    assert tree.ancestors(speech.pk) == [teams["nlp"].pk, teams["research"].pk]
    assert tree.parent_slug(speech.pk) == "nlp" and tree.parent_slug(teams["research"].pk) is None
    assert [t.slug for t in speech.ancestors()] == ["nlp", "research"]


@pytest.mark.parametrize("role", ROLES)
def test_teams_agree_on_page_api_and_rule(client, cast, objects, role):
    user = cast[role]
    rule = _allowed(user, "scheduling.see_team", Team.objects.all(), key=lambda team: team.slug)
    page = {row.record["slug"] for row in _page(client, user, "team-list")["table"].rows}
    api = {row["slug"] for row in _api_list(_api(user), "/api/v1/teams/")}
    assert page == api == rule
    for team in Team.objects.all():  # the detail pages say the same
        assert (client.get(reverse("team-detail", args=[team.slug])).status_code == 200) is (team.slug in rule)


@pytest.mark.parametrize("role", ROLES)
def test_quota_requests_agree_and_everyone_sees_their_own(client, cast, objects, role):
    user = cast[role]
    rule = _allowed(user, "scheduling.view_quota_request", QuotaRequest.objects.all())
    page = {row.record.pk for row in _page(client, user, "quota-list")["table"].rows}
    api = {row["id"] for row in _api_list(_api(user), "/api/v1/quota-requests/")}
    assert page == api == rule
    assert set(QuotaRequest.objects.filter(requester=user).values_list("pk", flat=True)) <= rule
    for item in QuotaRequest.objects.all():
        assert (client.get(reverse("quota-detail", args=[item.pk])).status_code == 200) is (item.pk in rule)


@pytest.mark.parametrize("role", ROLES)
def test_quota_requests_awaiting_a_decision_are_those_the_rule_lets_the_user_decide(client, cast, objects, role):
    user = cast[role]
    rule = _allowed(user, "scheduling.decide_quota_request", QuotaRequest.objects.all())
    page = {row.record.pk for row in _page(client, user, "quota-list")["awaiting"].rows}
    assert page == rule == set(access.quota_requests_decidable_by(user).values_list("pk", flat=True))


@pytest.mark.parametrize("role", ROLES)
def test_what_ifs_agree_on_page_api_and_rule(client, cast, objects, role):
    user = cast[role]
    rule = _allowed(user, "scheduling.view_whatif", WhatIfScenario.objects.all())
    page = {s.pk for s in _page(client, user, "whatif")["scenarios"]}
    api = {row["id"] for row in _api_list(_api(user), "/api/v1/whatif/")}
    assert page == api == rule


@pytest.mark.parametrize("role", ROLES)
def test_workloads_agree_on_api_team_pages_and_rule(client, cast, objects, role):
    user = cast[role]
    rule = _allowed(user, "scheduling.see_team", Workload.objects.all())
    api = {row["id"] for row in _api_list(_api(user), "/api/v1/workloads/")}
    assert api == rule
    client.force_login(user)
    on_team_pages = set()
    for team in Team.objects.all():
        response = client.get(reverse("team-detail", args=[team.slug]))
        if response.status_code == 200:
            on_team_pages |= {row.record.pk for row in response.context["pending_table"].rows}
    assert on_team_pages == {pk for pk in rule if Workload.objects.get(pk=pk).team_id is not None}


@pytest.mark.parametrize("role", ROLES)
def test_report_top_users_agree_on_page_api_and_rule(client, cast, week, role):  # noqa: F811
    user = cast[role]
    stored = report_delivery.generate_report(WEEK)
    full = {t["slug"]: {u["user"] for u in t["top_users"]} for t in stored.content["sections"]["teams"]["teams"]}
    rule = {slug for slug in full if is_portal_admin(user) or is_lead(user, Team.objects.get(slug=slug))}
    api = _api(user).get(f"/api/v1/reports/{stored.pk}/").json()["content"]["sections"]["teams"]["teams"]
    assert {t["slug"] for t in api if t["top_users"]} == {slug for slug in rule if full[slug]}
    scope = access.report_scope(user)
    assert (set(full) if scope is None else set(scope) & set(full)) == rule
    client.force_login(user)
    page = client.get(reverse("report-detail", args=[stored.pk])).content.decode()
    top = page.split("<h3>Top users</h3>")[1].split("</section>")[0] if "<h3>Top users</h3>" in page else ""
    shown = {name for names in full.values() for name in names if name in top}
    assert shown == {name for slug in rule for name in full[slug]}
