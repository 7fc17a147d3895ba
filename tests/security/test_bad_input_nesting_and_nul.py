"""Issue 16: JSON nested a thousand levels deep and NUL characters are a 400 naming the field and the rule.

PostgreSQL refuses NUL in text and in jsonb, so before these checks a NUL reached the database and came back
as a 500; SQLite stores it, so these tests assert the 400 itself, which fails before the change on both."""

import json

import pytest
from django.urls import reverse

from scheduling.api.parsers import MAX_JSON_DEPTH
from scheduling.models import FleetHost, NodeAlias, Orchestrator, QuotaRequest

from .bad_input_support import api_as

pytestmark = pytest.mark.django_db


def _nested(levels: int) -> str:
    return "[" * levels + "]" * levels


def _post_raw(client, url: str, text: str, method: str = "post"):
    return getattr(client, method)(url, data=text, content_type="application/json")


@pytest.mark.parametrize("levels", [1_000, 100_000])
@pytest.mark.parametrize(
    "method, url",
    [
        ("post", "/api/v1/quota-requests/"),
        ("post", "/api/v1/whatif/"),
        ("post", "/api/v1/orchestrators/"),
        ("post", "/api/v1/ledger/hosts/"),
        ("put", "/api/v1/reports/subscription/"),
    ],
)
def test_a_json_body_nested_too_deep_is_a_400_naming_the_rule(cast, teams, method, url, levels):
    response = _post_raw(api_as(cast["admin"]), url, _nested(levels), method)
    assert response.status_code == 400, response.content[:300]
    assert f"at most {MAX_JSON_DEPTH} levels" in json.dumps(response.json())


def test_a_deep_value_inside_a_field_is_refused_naming_the_field(cast, orchestrator):
    options = {"rebalance": json.loads(_nested(MAX_JSON_DEPTH + 5))}
    response = api_as(cast["admin"]).patch(
        f"/api/v1/orchestrators/{orchestrator.pk}/", {"options": options}, format="json"
    )
    assert response.status_code == 400
    assert "options" in json.dumps(response.json())
    orchestrator.refresh_from_db()
    assert orchestrator.options == {}


def test_json_nested_within_the_limit_still_parses(cast, teams, queues):
    inputs = {"weeks": 1, "fleet": [{"gpu_model": "H100", "nodes": 1}]}
    response = api_as(cast["admin"]).post("/api/v1/whatif/", {"name": "one more node", "inputs": inputs}, format="json")
    assert response.status_code == 201, response.content[:300]


def test_the_admins_json_fields_refuse_deep_nesting_with_a_form_error(client, cast, orchestrator):
    client.force_login(cast["admin"])
    url = reverse("admin:scheduling_orchestrator_change", args=[orchestrator.pk])
    response = client.post(
        url,
        {
            "name": orchestrator.name,
            "kind": orchestrator.kind,
            "endpoint": orchestrator.endpoint,
            "enabled": "on",
            "options": _nested(5_000),
            "change_reason": "deep",
        },
    )
    assert response.status_code == 200
    assert f"at most {MAX_JSON_DEPTH} levels" in response.content.decode()


# --- NUL -------------------------------------------------------------------------------------------------


def test_a_nul_in_a_team_slug_in_the_address_is_a_404(cast, teams):
    response = api_as(cast["admin"]).get("/api/v1/teams/nlp%00/")
    assert response.status_code == 404


@pytest.mark.parametrize("url", ["/api/v1/quota-requests/?team=nlp%00", "/api/v1/workloads/?user=a%00"])
def test_a_nul_in_a_query_filter_is_a_400_naming_the_parameter(cast, teams, url):
    response = api_as(cast["admin"]).get(url)
    assert response.status_code == 400
    assert "NUL" in json.dumps(response.json()) or "Null characters" in json.dumps(response.json())


def test_a_nul_in_a_quota_request_team_is_a_400_naming_the_field(cast, teams, queues, period):
    start, end = period
    body = {"team": "nlp\x00", "gpus": 1, "starts_at": start.isoformat(), "ends_at": end.isoformat()}
    response = api_as(cast["researcher"]).post("/api/v1/quota-requests/", {**body, "justification": "x"}, format="json")
    assert response.status_code == 400 and "team" in response.json()


def test_a_nul_in_ledger_gpu_uuids_is_a_400_naming_the_field(cast):
    body = {"name": "dgx99", "gpu_total": 8, "gpu_uuids": ["GPU-1\x00"], "reason": "new host"}
    response = api_as(cast["admin"]).post("/api/v1/ledger/hosts/", body, format="json")
    assert response.status_code == 400, response.content[:300]
    assert "gpu_uuids" in response.json() and "NUL" in json.dumps(response.json())
    assert not FleetHost.objects.exists()


def test_a_nul_in_a_json_key_is_a_400(cast):
    body = {"name": "dgx99", "gpu_total": 8, "reason": "new host", "notes\x00": "x"}
    response = api_as(cast["admin"]).post("/api/v1/ledger/hosts/", body, format="json")
    assert response.status_code == 400 and "NUL" in json.dumps(response.json())


@pytest.mark.parametrize("field", ["name", "orchestrator", "host", "reason"])
def test_a_nul_in_a_multipart_alias_upload_is_a_400_naming_the_field(cast, orchestrator, field):
    FleetHost.objects.create(name="dgx01", gpu_total=8)
    body = {"orchestrator": orchestrator.name, "name": "10.0.0.1", "host": "dgx01", "reason": "ray names by IP"}
    body[field] += "\x00"
    response = api_as(cast["admin"]).post("/api/v1/ledger/aliases/", body, format="multipart")
    assert response.status_code == 400, response.content[:300]
    assert field in response.json()
    assert not NodeAlias.objects.exists()


def test_a_nul_in_a_form_encoded_body_is_a_400(cast, orchestrator):
    response = api_as(cast["admin"]).patch(
        f"/api/v1/orchestrators/{orchestrator.pk}/",
        "endpoint=http%3A%2F%2Fa%00b",
        content_type="application/x-www-form-urlencoded",
    )
    assert response.status_code == 400 and "endpoint" in response.json()
    assert Orchestrator.objects.get(pk=orchestrator.pk).endpoint == orchestrator.endpoint


def test_a_nul_in_the_reason_of_a_delete_is_a_400(cast):
    host = FleetHost.objects.create(name="dgx01", gpu_total=8)
    response = api_as(cast["admin"]).delete(f"/api/v1/ledger/hosts/{host.pk}/?reason=gone%00")
    assert response.status_code == 400 and "reason" in response.json()
    assert FleetHost.objects.filter(pk=host.pk).exists()


def test_a_json_body_over_the_upload_limit_is_a_413_naming_the_limit_and_nothing_is_stored(cast, teams, settings):
    """Django bounds the body by DATA_UPLOAD_MAX_MEMORY_SIZE, but answered with a bare 400 page naming nothing."""
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 10_000
    body = {"team": teams["research"].slug, "gpus": 1, "justification": "x" * 20_000}
    response = _post_raw(api_as(cast["admin"]), "/api/v1/quota-requests/", json.dumps(body))
    assert response.status_code == 413, response.content[:300]
    assert "at most 10000 bytes" in response.json()["detail"]
    assert not QuotaRequest.objects.exists()
    small = _post_raw(api_as(cast["admin"]), "/api/v1/quota-requests/", json.dumps({**body, "justification": "ok"}))
    assert small.status_code != 413
