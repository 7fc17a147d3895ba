"""The list endpoints' cheaper code paths (issue 9, load) give exactly what stock DRF and knox give.

Serializers read through ``api/fastpath.py``, a short first page skips COUNT(*), and a token request
reads only its own token; each test below pins one of those to the behaviour it replaced.
"""

import base64
import inspect
import json
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from knox.models import AuthToken
from rest_framework import serializers as drf
from rest_framework.renderers import JSONRenderer
from rest_framework.test import APIClient

from scheduling.api import serializers
from scheduling.api.fastpath import FastReadMixin
from scheduling.models import (
    CollectorRun,
    Node,
    NodeMove,
    QuotaGrant,
    QuotaRequest,
    RebalancePlan,
    Team,
    UsageRollup,
    UsageSample,
    Workload,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def varied(orchestrator, fleet, teams, queues, cast, period):
    """One or more rows of every model the API lists, with the awkward values: NULL foreign keys and
    measurements, JSON, decimals, a decided and an undecided request, a plan with moves."""
    now = timezone.now()
    start, end = period
    orchestrator.options = {"api_version": "v0.0.40", "team_field": "account"}
    orchestrator.last_error = "timeout"
    orchestrator.save()
    Node.objects.filter(pk=fleet[0].pk).update(labels={"zone": "a", "tier": ["gold"]}, gpu_allocated=3, state="mixed")
    Workload.objects.create(
        orchestrator=orchestrator,
        external_id="run-1",
        team=teams["nlp"],
        user="rita",
        gang_size=2,
        gpus_per_member=4,
        state="running",
        submitted_at=now - timedelta(hours=2),
        started_at=now - timedelta(hours=1),
        nodes=[{"node": "dgx00", "gpus": [0, 1, 2, 3]}],
    )
    Workload.objects.create(orchestrator=orchestrator, external_id="q-1", team=None, submitted_at=now)
    undecided = QuotaRequest.objects.create(
        requester=cast["researcher"], team=teams["nlp"], gpus=8, starts_at=start, ends_at=end, justification="x"
    )
    decided = QuotaRequest.objects.create(
        requester=cast["researcher"],
        team=teams["nlp"],
        gpus=4,
        gpu_model="H100",
        orchestrator=orchestrator,
        starts_at=start,
        ends_at=end,
        justification="y",
        state="approved",
        decided_by=cast["lead"],
        decided_at=now,
        decision_comment="ok",
    )
    QuotaGrant.objects.create(request=decided, team=teams["nlp"], gpus=4, starts_at=start, ends_at=end)
    assert undecided.decided_by is None
    UsageSample.objects.create(taken_at=now, orchestrator=orchestrator, gpus_total=64, gpus_allocated=11.5)
    UsageRollup.objects.create(
        resolution="hour", period_start=now, orchestrator=orchestrator, team=teams["nlp"], gpu_s_busy=None, covered_s=60
    )
    CollectorRun.objects.create(orchestrator=orchestrator, started_at=now, ok=False, error="boom")
    plan = RebalancePlan.objects.create(reason="ray queue", expected_effect={"ray": 8, "note": None})
    NodeMove.objects.create(plan=plan, node=fleet[1], source=orchestrator, target=orchestrator, reason="empty")
    return now


def _model_serializers():
    return [
        cls
        for _name, cls in inspect.getmembers(serializers, inspect.isclass)
        if issubclass(cls, drf.ModelSerializer)
        and issubclass(cls, FastReadMixin)
        and hasattr(cls, "Meta")
    ]


def test_every_model_serializer_returns_exactly_what_stock_drf_returns(varied):
    checked = 0
    for cls in _model_serializers():
        for instance in cls.Meta.model.objects.all():
            fast = cls(instance)
            assert fast.data == drf.ModelSerializer.to_representation(cls(instance), instance), (cls, instance)
            checked += 1
    assert len(_model_serializers()) >= 10 and checked >= 20


@pytest.mark.parametrize("zone", ["Europe/Berlin", "America/St_Johns"])
def test_datetimes_read_as_stock_drf_shows_them_in_other_time_zones(varied, settings, zone):
    settings.TIME_ZONE = zone
    shown = 0
    for cls in _model_serializers():
        for instance in cls.Meta.model.objects.all()[:5]:
            fast = cls(instance).data
            assert fast == drf.ModelSerializer.to_representation(cls(instance), instance), (cls, instance)
            shown += sum(isinstance(v, str) and v[10:11] == "T" and not v.endswith("Z") for v in fast.values())
    assert shown > 0  # some datetimes were shown with the zone's offset, not in UTC


def test_a_list_page_renders_the_same_json_as_stock_drf(api, varied):
    body = api("admin").get("/api/v1/quota-requests/").json()
    rows = QuotaRequest.objects.filter(pk__in=[r["id"] for r in body["results"]])
    stock = [drf.ModelSerializer.to_representation(serializers.QuotaRequestSerializer(r), r) for r in rows]
    rendered = json.loads(JSONRenderer().render(stock))
    assert sorted(body["results"], key=lambda r: r["id"]) == sorted(rendered, key=lambda r: r["id"])
    assert {r["decided_by"] for r in body["results"]} == {None, "leo"}


def _queries(client, url: str) -> tuple[list[str], dict]:
    with CaptureQueriesContext(connection) as queries:
        response = client.get(url)
    assert response.status_code == 200
    return [q["sql"] for q in queries.captured_queries], response.json()


def test_a_first_page_holding_everything_is_counted_without_a_count_query(api, fleet):
    sql, body = _queries(api("admin"), "/api/v1/nodes/")
    assert body["count"] == 8 and len(body["results"]) == 8 and body["next"] is None
    assert not [q for q in sql if "COUNT(" in q.upper()]


def test_a_full_first_page_is_counted_and_links_the_next_page(api, orchestrator):
    Node.objects.bulk_create(
        Node(orchestrator=orchestrator, name=f"n{i:03d}", gpu_model="H100", gpu_total=8) for i in range(150)
    )
    client = api("admin")
    sql, first = _queries(client, "/api/v1/nodes/")
    assert first["count"] == 150 and len(first["results"]) == 100 and first["next"].endswith("page=2")
    assert len([q for q in sql if "COUNT(" in q.upper()]) == 1
    second = client.get(first["next"]).json()
    assert second["count"] == 150 and len(second["results"]) == 50 and second["next"] is None
    assert {r["name"] for r in first["results"]}.isdisjoint(r["name"] for r in second["results"])
    assert client.get("/api/v1/nodes/?page=3").status_code == 404


def test_an_empty_list_is_a_page_with_count_zero(api, db, cast):
    body = api("admin").get("/api/v1/workloads/").json()
    assert body == {"count": 0, "next": None, "previous": None, "results": []}


def test_a_token_request_reads_only_its_own_token(api, cast, fleet):
    for _ in range(3):
        AuthToken.objects.create(cast["researcher"])
    sql, _body = _queries(api("researcher"), "/api/v1/nodes/")
    assert len([q for q in sql if "knox_authtoken" in q]) == 1


def test_a_token_and_its_user_are_loaded_as_the_orm_loads_them_on_every_database(cast):
    """SQLite returns datetimes as naive text from raw SQL: unconverted, every token request was a 500."""
    from scheduling.api.auth import tokens_with_key

    stored, token = AuthToken.objects.create(cast["researcher"])
    cast["researcher"].refresh_from_db()
    (loaded,) = tokens_with_key(token[:15])
    assert loaded.expiry == stored.expiry and loaded.expiry.tzinfo is not None
    assert loaded.created == AuthToken.objects.get(pk=stored.pk).created
    assert loaded.user.date_joined == cast["researcher"].date_joined
    assert loaded.user.is_active is True


def test_an_expired_token_is_refused_and_deleted_when_presented(cast):
    _, token = AuthToken.objects.create(cast["researcher"], expiry=timedelta(seconds=-1))
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    assert client.get("/api/v1/teams/").status_code == 401
    assert not AuthToken.objects.filter(user=cast["researcher"]).exists()


def test_a_token_of_an_inactive_user_is_refused(cast):
    _, token = AuthToken.objects.create(cast["researcher"])
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    assert client.get("/api/v1/teams/").status_code == 200
    type(cast["researcher"]).objects.filter(pk=cast["researcher"].pk).update(is_active=False)
    assert client.get("/api/v1/teams/").status_code == 401


def test_the_right_key_with_a_wrong_secret_is_refused_and_the_right_user_is_found(cast):
    _, mine = AuthToken.objects.create(cast["researcher"])
    _, theirs = AuthToken.objects.create(cast["admin"])
    client = APIClient()
    forged = mine[:15] + ("0" if mine[15] != "0" else "1") + mine[16:]  # same key, other secret
    client.credentials(HTTP_AUTHORIZATION=f"Token {forged}")
    assert client.get("/api/v1/teams/").status_code == 401
    for token, user in ((mine, cast["researcher"]), (theirs, cast["admin"])):
        client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
        response = client.get("/api/v1/teams/")
        assert response.status_code == 200 and response.wsgi_request.user == user


def test_creating_a_token_purges_the_users_expired_tokens_and_keeps_live_ones(cast):
    for _ in range(2):
        AuthToken.objects.create(cast["researcher"], expiry=timedelta(seconds=-1))
    AuthToken.objects.create(cast["researcher"], expiry=timedelta(days=1))
    AuthToken.objects.create(cast["lead"], expiry=timedelta(seconds=-1))
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION="Basic " + base64.b64encode(b"rita:pw").decode())
    assert client.post("/api/v1/auth/tokens/").status_code == 200
    mine = AuthToken.objects.filter(user=cast["researcher"])
    assert mine.count() == 2 and not mine.filter(expiry__lt=timezone.now()).exists()
    assert AuthToken.objects.filter(user=cast["lead"]).count() == 1  # another user's tokens are not touched


LISTS = ("/api/v1/teams/", "/api/v1/queues/", "/api/v1/nodes/", "/api/v1/workloads/", "/api/v1/quota-requests/")


@pytest.mark.parametrize("role", ["admin", "researcher"])
def test_list_endpoints_issue_the_same_few_queries_for_one_row_or_ninety(api, varied, orchestrator, teams, role):
    client = api(role)
    before = {url: len(_queries(client, url)[0]) for url in LISTS}
    now = timezone.now()
    Node.objects.bulk_create(
        Node(orchestrator=orchestrator, name=f"x{i:03d}", gpu_model="A100", gpu_total=8) for i in range(90)
    )
    Workload.objects.bulk_create(
        Workload(orchestrator=orchestrator, external_id=f"x{i}", team=teams["nlp"], submitted_at=now) for i in range(90)
    )
    after = {url: len(_queries(client, url)[0]) for url in LISTS}
    assert after == before
    # token (1) + visible teams (researcher: 1) + page (1) + count only for a full page
    assert max(after.values()) <= 4


@pytest.mark.parametrize(
    ("url", "model", "names"),
    [
        ("/api/v1/nodes/", Node, {"orchestrator": "name"}),
        ("/api/v1/workloads/", Workload, {"orchestrator": "name", "team": "slug"}),
        ("/api/v1/usage/samples/", UsageSample, {"orchestrator": "name", "team": "slug"}),
        ("/api/v1/collector-runs/", CollectorRun, {"orchestrator": "name"}),
        ("/api/v1/quota-requests/", QuotaRequest, {"requester": "username", "decided_by": "username"}),
    ],
)
def test_related_names_read_from_annotations_match_the_related_rows(api, varied, url, model, names):
    """Lists name related rows from a joined column instead of building the related model per row;
    what they show must be the related row's own name (NULL relations as null)."""
    rows = api("admin").get(url).json()["results"]
    assert rows
    by_id = {obj.pk: obj for obj in model.objects.all()}
    key = "id" if "id" in rows[0] else None
    for row in rows:
        obj = by_id[row[key]] if key else next(iter(by_id.values()))
        for field, attr in names.items():
            related = getattr(obj, field)
            assert row[field] == (None if related is None else getattr(related, attr)), (url, field)


def test_the_filterset_is_built_only_when_a_parameter_could_be_a_filter(api, varied, monkeypatch):
    from django_filters import FilterSet

    built = []
    original = FilterSet.__init__

    def counting(self, *args, **kwargs):
        built.append(type(self).__name__)
        original(self, *args, **kwargs)

    monkeypatch.setattr(FilterSet, "__init__", counting)
    client = api("admin")
    everything = client.get("/api/v1/nodes/").json()["count"]
    assert built == []
    assert client.get("/api/v1/nodes/?page=1").json()["count"] == everything and built == []
    some = client.get(f"/api/v1/nodes/?state={Node.objects.values_list('state', flat=True)[0]}").json()["count"]
    assert built == ["NodeFilter"] and some > 0
    assert client.get("/api/v1/nodes/?state=no-such-state").status_code == 400  # still validated
    assert client.get("/api/v1/workloads/?submitted_after=2020-01-01T00:00:00Z").status_code == 200
    assert built[-1] == "WorkloadFilter"
    # A view with ``filterset_fields`` (django-filter builds its FilterSet class per request) likewise.
    before = len(built)
    teams = client.get("/api/v1/teams/").json()["count"]
    assert len(built) == before
    parent = Team.objects.filter(parent__isnull=False).values_list("parent_id", flat=True).first()
    children = client.get(f"/api/v1/teams/?parent={parent}").json()["count"]
    assert built[-1] == "AutoFilterSet" and 0 < children < teams
