"""Issue 29 item 12: a researcher does not read a teammate's job history through the API (the drill-down's
rule), a user in no team reads no team's mappings, overrides, orchestrator options or allocations, and a
catch-all group pattern cannot make everyone a lead."""

from datetime import timedelta

import pytest
from django.utils import timezone

from scheduling.models import GroupMapping, IdentityOverride, Workload

pytestmark = pytest.mark.django_db


@pytest.fixture
def nlp_jobs(orchestrator, teams):
    now = timezone.now()

    def job(external_id, user, state):
        return Workload.objects.create(
            orchestrator=orchestrator, external_id=external_id, team=teams["nlp"], user=user, state=state,
            submitted_at=now - timedelta(hours=2),
        )

    return [
        job("bob-done", "bob", Workload.State.COMPLETED),
        job("bob-waits", "bob", Workload.State.PENDING),
        job("rita-done", "rita", Workload.State.COMPLETED),
    ]


def _ids(client, query=""):
    return sorted(w["external_id"] for w in client.get(f"/api/v1/workloads/{query}").json()["results"])


def test_a_researcher_reads_a_teammates_queue_but_not_their_history(api, cast, nlp_jobs):
    researcher = api("researcher")
    assert _ids(researcher, "?user=bob") == ["bob-waits"]
    assert _ids(researcher) == ["bob-waits", "rita-done"]
    assert researcher.get(f"/api/v1/workloads/{nlp_jobs[0].pk}/").status_code == 404
    assert _ids(api("lead"), "?user=bob") == ["bob-done", "bob-waits"]  # leads read their teams' history
    assert _ids(api("admin"), "?user=bob") == ["bob-done", "bob-waits"]


@pytest.fixture
def no_team(django_user_model):
    return django_user_model.objects.create_user("nobody", password="pw")


def test_a_user_in_no_team_reads_no_mappings_overrides_options_or_allocations(
    api, cast, teams, queues, orchestrator, no_team, client
):
    from knox.models import AuthToken
    from rest_framework.test import APIClient

    GroupMapping.objects.create(pattern="gpu-nlp-*", team=teams["nlp"])
    IdentityOverride.objects.create(user=cast["researcher"], kind="slurm_user", name="rsmith")
    orchestrator.options = {"slurm_conf": "/etc/gpuportal/credentials/slurm.conf"}
    orchestrator.save()
    stranger = APIClient()
    stranger.credentials(HTTP_AUTHORIZATION=f"Token {AuthToken.objects.create(no_team)[1]}")
    assert stranger.get("/api/v1/group-mappings/").json()["count"] == 0
    assert stranger.get("/api/v1/identity-overrides/").json()["count"] == 0
    assert "options" not in stranger.get("/api/v1/orchestrators/").json()["results"][0]
    assert api("researcher").get("/api/v1/group-mappings/").json()["count"] == 1  # their team's
    assert api("researcher").get("/api/v1/identity-overrides/").json()["count"] == 1  # their own
    assert api("lead").get("/api/v1/identity-overrides/").json()["count"] == 0
    assert api("admin").get("/api/v1/orchestrators/").json()["results"][0]["options"]["slurm_conf"]
    client.force_login(no_team)
    assert client.get("/").context["teams"] == []
    client.force_login(cast["researcher"])
    assert client.get("/").context["teams"]


@pytest.mark.parametrize("pattern", ["*", "**", "*?", " * "])
def test_a_catch_all_group_pattern_as_lead_is_refused_naming_the_pattern(api, teams, pattern):
    body = {"pattern": pattern, "team": "nlp", "role": "lead", "reason": "everyone leads"}
    response = api("admin").post("/api/v1/group-mappings/", body, format="json")
    assert response.status_code == 400 and "matches every group" in response.json()["pattern"][0]
    assert not GroupMapping.objects.exists()
    as_researcher = {**body, "role": "researcher", "reason": "all staff are researchers"}
    assert api("admin").post("/api/v1/group-mappings/", as_researcher, format="json").status_code == 201
