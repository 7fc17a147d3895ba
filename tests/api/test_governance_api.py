"""Issue 31 item 6: governance operable through the REST API (/api/v1/governance/...) and /metrics: rounds and
their failures, drift and plans waiting for an admin (decided through the API with a reason, audited), guarantees
not kept; admins only, as the Governance page."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from scheduling.models import DriftFinding, EnforcementPlan, EnforcementRun, Workload
from scheduling.services.enforcement import rounds as enforcement_rounds
from tests.app import test_enforcement as base
from tests.app.test_enforcement import FakeCluster, governed, hand_edit
from tests.operations.test_operator_metrics import sample, scrape

clusters, hpc = base.clusters, base.hpc  # the fake clusters and the auto-mode Slurm orchestrator "hpc"


@pytest.fixture
def drifted(queues, cast, hpc, clusters):
    """hpc enforced, research's Fairshare then edited by hand (an open drift); hpc-review waits on a plan."""
    governed("hpc-review", mode="review")
    enforcement_rounds.reconcile()
    hand_edit(clusters["hpc"], "research", fairshare=1)
    enforcement_rounds.reconcile()
    return DriftFinding.objects.get(state="open")


@pytest.mark.parametrize("role", ["researcher", "lead", "outsider", "anonymous"])
def test_only_admins_read_governance_through_the_api(api, cast, drifted, role):
    client = api(role)
    for path in ("status/", "rounds/", "drift/", "plans/"):
        assert client.get(f"/api/v1/governance/{path}").status_code in (401, 403)
    assert client.post(f"/api/v1/governance/drift/{drifted.pk}/adopt/", {"reason": "x"}).status_code in (401, 403)
    assert DriftFinding.objects.get(pk=drifted.pk).state == "open"


def test_the_status_says_what_failed_what_waits_and_how_long(api, cast, drifted, clusters):
    clusters["hpc-review"] = FakeCluster()
    clusters["hpc-review"].down = True
    enforcement_rounds.reconcile()
    body = api("admin").get("/api/v1/governance/status/").json()
    assert body["last_round"]["state"] == "failed" and body["round_in_progress"] is None
    by_name = {o["orchestrator"]: o for o in body["orchestrators"]}
    assert "connection refused" in by_name["hpc-review"]["error"] and not by_name["hpc-review"]["read_back"]
    assert by_name["hpc"]["error"] == "" and by_name["hpc"]["drifted"] == 1
    assert [(d["orchestrator"], d["count"]) for d in body["drift_open"]] == [("hpc", 1)]
    assert [p["orchestrator"] for p in body["plans_pending"]] == ["hpc-review", "slurm-a"]  # both in review mode


def test_rounds_list_filters_the_failed_ones_and_shows_each_orchestrators_objects(api, cast, drifted, clusters):
    clusters["hpc"].down = True
    enforcement_rounds.reconcile()
    rounds = api("admin").get("/api/v1/governance/rounds/?failed=true").json()["results"]
    assert len(rounds) == 1 and rounds[0]["state"] == "failed"
    outcome = next(o for o in rounds[0]["outcomes"] if o["orchestrator"] == "hpc")
    assert not outcome["read_back"] and "connection refused" in outcome["error"]
    everything = api("admin").get("/api/v1/governance/rounds/").json()["results"]
    assert len(everything) == 3 and {r["state"] for r in everything} == {"ok", "failed"}


def test_an_admin_adopts_a_drift_and_approves_a_plan_through_the_api_with_a_reason(api, cast, drifted):
    admin = api("admin")
    refused = admin.post(f"/api/v1/governance/drift/{drifted.pk}/adopt/", {}, format="json")
    assert refused.status_code == 400 and "reason" in refused.json()
    adopted = admin.post(f"/api/v1/governance/drift/{drifted.pk}/adopt/", {"reason": "ops agreed"}, format="json")
    assert adopted.status_code == 200 and adopted.json()["state"] == "adopted"
    assert adopted.json()["decided_by"] == "ada"
    again = admin.post(f"/api/v1/governance/drift/{drifted.pk}/revert/", {"reason": "no"}, format="json")
    assert again.status_code == 400 and "state" in again.json()  # decided already: named, not a 500
    plan = EnforcementPlan.objects.get(state="pending", orchestrator__name="hpc-review")
    listed = admin.get("/api/v1/governance/plans/?state=pending").json()["results"]
    assert plan.pk in [p["id"] for p in listed] and all(p["state"] == "pending" and p["changes"] for p in listed)
    approved = admin.post(f"/api/v1/governance/plans/{plan.pk}/approve/", {"reason": "reviewed"}, format="json")
    assert approved.status_code == 200 and approved.json()["state"] == "approved"
    assert plan.history.filter(history_user=cast["admin"], state="approved").exists()


def test_metrics_serve_round_failures_open_drift_age_and_unmet_guarantees(client, settings, drifted, clusters, teams):
    DriftFinding.objects.filter(pk=drifted.pk).update(found_at=timezone.now() - timedelta(hours=2))
    clusters["hpc"].down = True
    enforcement_rounds.reconcile()
    nlp, orchestrator = teams["nlp"], drifted.orchestrator
    for i, (state, gpus) in enumerate((("running", 2), ("pending", 8))):
        Workload.objects.create(
            orchestrator=orchestrator, team=nlp, external_id=f"w{i}", state=state, gpus_per_member=gpus,
            submitted_at=timezone.now(),
        )  # fmt: skip
    text = scrape(client, settings)
    assert sample(text, "gpuportal_governance_round_failed", orchestrator="hpc") == 1
    assert sample(text, "gpuportal_governance_round_failed", orchestrator="hpc-review") == 0
    assert sample(text, "gpuportal_governance_drift_open", orchestrator="hpc", measure="count") == 1
    assert sample(text, "gpuportal_governance_drift_open", orchestrator="hpc", measure="oldest_seconds") > 7000
    assert sample(text, "gpuportal_governance_plans_pending", orchestrator="hpc-review", measure="count") == 1
    assert sample(text, "gpuportal_team_guarantee_unmet_gpus", team="nlp") == 6  # guarantee 8, holds 2, awaits 8
    # nlp's work is research's too: guarantee 16, holds 2, awaits 8
    assert sample(text, "gpuportal_team_guarantee_unmet_gpus", team="research") == 8
    assert sample(text, "gpuportal_team_guarantee_unmet_gpus", team="production") == 0
    last = sample(text, "gpuportal_governance_round_last_finished_timestamp_seconds")
    assert last == pytest.approx(EnforcementRun.objects.latest("finished_at").finished_at.timestamp())
    assert sample(text, "gpuportal_governance_round_running_seconds") == 0
