import math

import pytest
from rest_framework.test import APIClient

from scheduling.models import Orchestrator, Queue, QuotaRequest

pytestmark = pytest.mark.django_db


def test_a_token_is_issued_with_basic_auth_used_and_revoked(cast):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION="Basic " + __import__("base64").b64encode(b"rita:pw").decode())
    issued = client.post("/api/v1/auth/tokens/")
    assert issued.status_code == 200 and issued.json()["expiry"]
    bearer = APIClient()
    bearer.credentials(HTTP_AUTHORIZATION=f"Token {issued.json()['token']}")
    assert bearer.get("/api/v1/teams/").status_code == 200
    assert bearer.post("/api/v1/auth/logout/").status_code == 204
    assert bearer.get("/api/v1/teams/").status_code == 401


def test_tokens_are_stored_hashed(cast):
    from knox.models import AuthToken

    _, token = AuthToken.objects.create(cast["researcher"])
    stored = AuthToken.objects.get(user=cast["researcher"])
    assert token not in (stored.digest, stored.token_key) and stored.token_key == token[: len(stored.token_key)]


def test_an_expired_token_is_refused(cast):
    from datetime import timedelta

    from knox.models import AuthToken

    _, token = AuthToken.objects.create(cast["researcher"], expiry=timedelta(seconds=-1))
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    assert client.get("/api/v1/teams/").status_code == 401


def test_a_weight_split_over_100_percent_is_a_400_naming_the_field(api, queues):
    response = api("admin").patch(
        f"/api/v1/queues/{queues['research'].pk}/", {"weight": "50", "reason": "x"}, format="json"
    )
    assert response.status_code == 400
    assert "weight" in response.json() and "100%" in response.json()["weight"][0]
    assert Queue.objects.get(pk=queues["research"].pk).weight == 40


def test_a_queue_change_without_reason_is_refused(api, queues):
    response = api("admin").patch(f"/api/v1/queues/{queues['research'].pk}/", {"weight": "30"}, format="json")
    assert response.status_code == 400 and "reason" in response.json()


def test_queue_history_says_who_and_why(api, queues):
    api("admin").patch(
        f"/api/v1/queues/{queues['research'].pk}/", {"weight": "30", "reason": "q3 review"}, format="json"
    )
    history = api("admin").get(f"/api/v1/queues/{queues['research'].pk}/history/").json()
    assert history[0]["history_user"] == "ada" and history[0]["history_change_reason"] == "q3 review"
    assert history[0]["weight"] == "30.00"


@pytest.mark.parametrize("gpus", [-1, 0, 10**9, "NaN", "1.5", None])
def test_bad_gpu_counts_are_refused_and_nothing_is_saved(api, teams, queues, iso_period, gpus):
    start, end, _ = iso_period
    body = {"team": "nlp", "gpus": gpus, "starts_at": start, "ends_at": end, "justification": "x"}
    response = api("researcher").post("/api/v1/quota-requests/", body, format="json")
    assert response.status_code == 400 and "gpus" in response.json()
    assert not QuotaRequest.objects.exists()


def test_an_end_before_the_start_is_refused(api, teams, queues, iso_period):
    start, _, earlier = iso_period
    body = {"team": "nlp", "gpus": 2, "starts_at": start, "ends_at": earlier, "justification": "x"}
    response = api("researcher").post("/api/v1/quota-requests/", body, format="json")
    assert response.status_code == 400 and "ends_at" in response.json()


def test_approving_over_capacity_is_a_400_and_the_request_stays_submitted(api, teams, queues, iso_period):
    start, end, _ = iso_period
    body = {"team": "nlp", "gpus": 30, "starts_at": start, "ends_at": end, "justification": "big run"}
    created = api("researcher").post("/api/v1/quota-requests/", body, format="json").json()
    response = api("admin").post(f"/api/v1/quota-requests/{created['id']}/approve/", {}, format="json")
    assert response.status_code == 400 and "gpus" in response.json()
    assert QuotaRequest.objects.get(pk=created["id"]).state == "submitted"


def test_a_lead_approves_and_the_grant_is_returned(api, nlp_request):
    response = api("lead").post(f"/api/v1/quota-requests/{nlp_request.pk}/approve/", {"comment": "go"}, format="json")
    assert response.status_code == 201 and response.json()["gpus"] == 4


def test_an_api_approval_mails_the_requester_once_committed(api, cast, nlp_request, django_capture_on_commit_callbacks):
    from django.core import mail

    cast["researcher"].email = "rita@example.org"
    cast["researcher"].save()
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        response = api("lead").post(
            f"/api/v1/quota-requests/{nlp_request.pk}/approve/", {"comment": "go"}, format="json"
        )
    assert response.status_code == 201 and callbacks  # the mail and the governance round wait for the commit
    assert [m.to for m in mail.outbox] == [["rita@example.org"]] and "approved" in mail.outbox[-1].subject
    assert f"/quota/{nlp_request.pk}/" in mail.outbox[-1].body and "go" in mail.outbox[-1].body


def test_a_refused_api_approval_mails_nobody(api, teams, queues, iso_period, django_capture_on_commit_callbacks):
    start, end, _ = iso_period
    body = {"team": "nlp", "gpus": 30, "starts_at": start, "ends_at": end, "justification": "big run"}
    created = api("researcher").post("/api/v1/quota-requests/", body, format="json").json()
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        api("admin").post(f"/api/v1/quota-requests/{created['id']}/approve/", {}, format="json")
    assert callbacks == []


def test_credentials_are_write_only_and_must_be_a_reference(api):
    bad = api("admin").post(
        "/api/v1/orchestrators/",
        {"name": "s1", "kind": "slurm", "endpoint": "http://x:6820", "credentials_ref": "eyJhbGciOi.secret"},
        format="json",
    )
    assert bad.status_code == 400 and "credentials_ref" in bad.json()
    good = api("admin").post(
        "/api/v1/orchestrators/",
        {"name": "s1", "kind": "slurm", "endpoint": "http://x:6820", "credentials_ref": "env:GPUPORTAL_SECRET_JWT"},
        format="json",
    )
    assert good.status_code == 201
    listed = api("researcher").get("/api/v1/orchestrators/").json()["results"]
    assert listed[0]["has_credentials"] is True and "credentials_ref" not in listed[0]
    assert Orchestrator.objects.get(name="s1").history.first().history_user.username == "ada"


def test_an_unknown_team_names_the_field(api, queues, iso_period):
    start, end, _ = iso_period
    body = {"team": "nope", "gpus": 1, "starts_at": start, "ends_at": end, "justification": "x"}
    response = api("researcher").post("/api/v1/quota-requests/", body, format="json")
    assert response.status_code == 400 and "team" in response.json()


def test_usage_rollups_filter_by_team_and_time(api, orchestrator, teams):
    from datetime import UTC, datetime

    from scheduling.models import UsageRollup

    for hour in range(3):
        UsageRollup.objects.create(
            resolution="hour",
            period_start=datetime(2026, 1, 1, hour, tzinfo=UTC),
            orchestrator=orchestrator,
            team=teams["nlp"],
            gpu_s_allocated=3600.0 * hour,
            covered_s=3600,
        )
    rows = api("researcher").get("/api/v1/usage/rollups/", {"team": "nlp", "since": "2026-01-01T01:00:00Z"}).json()
    assert [r["gpu_s_allocated"] for r in rows["results"]] == [7200.0, 3600.0]
    assert not any(math.isnan(r["gpu_s_allocated"]) for r in rows["results"])


def test_metrics_expose_pool_and_staleness_gauges(client, fleet, orchestrator, settings):
    settings.METRICS_TOKEN = "t"  # /metrics needs it or an admin (tests/security)
    body = client.get("/metrics", HTTP_AUTHORIZATION="Bearer t").content.decode()
    assert 'gpuportal_pool_gpus{orchestrator="slurm-a",state="total"} 64.0' in body
    assert 'gpuportal_source_stale{orchestrator="slurm-a"} 1.0' in body


def test_health_reports_database_broker_and_sources(client, orchestrator, cast):
    client.force_login(cast["admin"])  # the details are for admins (tests/security)
    response = client.get("/health")
    data = response.json()
    assert data["checks"]["database"] == "ok"
    assert data["checks"]["orchestrators"]["slurm-a"]["stale"] is True
    assert response.status_code == (200 if data["checks"]["broker"] == "ok" else 503)


def test_the_openapi_schema_and_offline_docs_are_served(client, cast):
    client.force_login(cast["researcher"])
    schema = client.get("/api/schema/", {"format": "json"})
    assert schema.status_code == 200 and "/api/v1/quota-requests/{id}/approve/" in schema.json()["paths"]
    docs = client.get("/api/docs/").content.decode()
    assert "swagger-ui" in docs and "cdn" not in docs.lower()


def test_list_filters_name_teams_and_orchestrators_and_an_unknown_name_is_a_400(api, orchestrator, nlp_request):
    client = api("admin")
    found = client.get("/api/v1/quota-requests/?team=nlp").json()["results"]
    assert [row["id"] for row in found] == [nlp_request.pk]
    assert client.get("/api/v1/workloads/?team=nlp&orchestrator=slurm-a").status_code == 200
    unknown = client.get("/api/v1/quota-requests/?team=nope")
    assert unknown.status_code == 400 and "nope" in unknown.json()["team"][0]
    assert "orchestrator" in client.get("/api/v1/nodes/?orchestrator=nope").json()


def test_the_quota_page_filters_with_the_same_filterset(client, cast, nlp_request):
    client.force_login(cast["admin"])
    shown = client.get("/quota/?team=nlp").context["table"].rows
    assert [row.record.pk for row in shown] == [nlp_request.pk]
    assert "no team is called nope" in client.get("/quota/?team=nope").content.decode()
