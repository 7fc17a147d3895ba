"""Who may see which team, applied by construction (issue #34.1, as NetBox's ``restrict()``): every filter, form
field and API field that names a team chooses among the user's visible teams, and a hidden team is answered
exactly as a missing one, so an outsider cannot tell which teams exist."""

import ast
import re
from pathlib import Path

import pytest
from django.test import RequestFactory
from django.urls import reverse

from scheduling import filters
from scheduling.forms import WhatIfForm
from scheduling.models import Team

pytestmark = pytest.mark.django_db

SCHEDULING = Path(__file__).resolve().parents[2] / "scheduling"
HIDDEN_FROM_OUTSIDER = ("research", "nlp")  # otto is in production only


def _options(html: str, field: str) -> set[str]:
    select = re.search(rf'<select name="{field}"[^>]*>(.*?)</select>', html, re.S)
    assert select, f"no <select name={field}> on the page"
    return set(re.findall(r'<option value="([^"]*)"', select.group(1))) - {""}


@pytest.mark.parametrize("page", ["quota-list", "team-list", "team-detail"])
def test_an_outsiders_team_dropdowns_list_only_the_teams_it_may_see(client, cast, queues, page):
    client.force_login(cast["outsider"])
    url = reverse(page, args=["production"]) if page == "team-detail" else reverse(page)
    html = client.get(url).content.decode()
    production = Team.objects.get(slug="production")
    found = False
    for field in ("team", "parent"):
        if f'<select name="{field}"' in html:
            found = True
            assert _options(html, field) <= {"production", str(production.pk)}, (page, field)
    assert found, f"{page} has no team dropdown to check"
    for slug in HIDDEN_FROM_OUTSIDER:
        assert f">{Team.objects.get(slug=slug).name}<" not in html


@pytest.mark.parametrize("path", ["/api/v1/workloads/", "/api/v1/quota-requests/", "/api/v1/grants/"])
def test_a_hidden_team_in_an_api_filter_is_answered_as_a_missing_one(api, cast, teams, path):
    outsider = api("outsider")
    hidden = outsider.get(path, {"team": "nlp"})
    missing = outsider.get(path, {"team": "no-such-team"})
    assert hidden.status_code == missing.status_code == 400
    assert hidden.json() == {"team": ["no team is called nlp."]}
    assert missing.json() == {"team": ["no team is called no-such-team."]}
    assert api("researcher").get(path, {"team": "nlp"}).status_code == 200


def test_a_quota_request_for_a_hidden_team_is_refused_as_for_a_missing_one(api, cast, teams, iso_period):
    start, end, _ = iso_period
    body = {"gpus": 4, "justification": "a sweep", "starts_at": start, "ends_at": end}
    hidden = api("outsider").post("/api/v1/quota-requests/", {**body, "team": "nlp"}, format="json")
    missing = api("outsider").post("/api/v1/quota-requests/", {**body, "team": "ghost"}, format="json")
    assert hidden.status_code == missing.status_code == 400
    assert hidden.json() == {"team": ["Object with slug=nlp does not exist."]}
    assert missing.json() == {"team": ["Object with slug=ghost does not exist."]}


def _filtersets():
    pending = [filters.VisibleFilterSet]
    while pending:
        cls = pending.pop()
        pending.extend(cls.__subclasses__())
        yield cls


def test_every_filterset_needs_the_request_and_offers_only_visible_teams(cast, teams):
    request = RequestFactory().get("/")
    request.user = cast["outsider"]
    checked = 0
    for cls in _filtersets():
        if cls._meta.model is None:  # a base without a model (VisibleFilterSet, _UsageFilter)
            continue
        with pytest.raises(TypeError, match="needs request="):
            cls({})
        form = cls({}, request=request).form
        for name, field in form.fields.items():
            queryset = getattr(field, "queryset", None)
            if queryset is not None and queryset.model is Team:
                assert set(queryset.values_list("slug", flat=True)) == {"production"}, (cls.__name__, name)
                checked += 1
    assert checked >= 4  # team filters of workloads, quota requests, grants, usage, the team list's parent


def test_the_whatif_form_weighs_only_visible_teams(cast, teams):
    form = WhatIfForm(user=cast["researcher"])
    assert set(form.fields["weight_team"].queryset.values_list("slug", flat=True)) == {"nlp"}


def test_no_form_filter_or_serializer_offers_every_team():
    """``Team.objects.all()`` as the choices of a field is how the old filters leaked every team's name."""
    offenders = []
    for path in [SCHEDULING / "filters.py", SCHEDULING / "forms.py", *sorted((SCHEDULING / "api").glob("*.py"))]:
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Call):
                continue
            field = ast.unparse(node.func).rsplit(".", 1)[-1]
            positional = node.args[:1] if field in ("ModelChoiceField", "ModelMultipleChoiceField") else []
            values = [k.value for k in node.keywords if k.arg == "queryset"] + positional
            offenders += [f"{path.name}:{node.lineno}" for v in values if ast.unparse(v) == "Team.objects.all()"]
    assert not offenders, offenders
