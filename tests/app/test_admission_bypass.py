""""Admission bypassed" findings: recorded after ingest for a team's GPU pods without the webhook's decision, once
per pod, shown on the governance page and in the API to those who may see the team."""

from datetime import UTC, datetime

import pytest

from scheduling.collectors.snapshot import AdmissionGap, ObservedWorkload, Snapshot, WorkloadState
from scheduling.engine.types import OrchestratorKind
from scheduling.models import AdmissionDecision, Orchestrator
from scheduling.services.ingest import ingest_snapshot

pytestmark = pytest.mark.django_db
T0 = datetime(2026, 12, 4, 12, 0, tzinfo=UTC)


@pytest.fixture
def k8s(db):
    return Orchestrator.objects.create(name="k8s-a", kind="kubernetes", endpoint="https://k8s.example")


def _pod_workload(name, team="nlp", gaps=True, scheduler="default-scheduler"):
    gap = AdmissionGap("nlp" if team == "nlp" else team, name, f"uid-{name}", T0.timestamp() - 30)
    return ObservedWorkload(
        external_id=f"{gap.namespace}/pod/{name}", orchestrator="k8s-a", team=team, state=WorkloadState.PENDING,
        gpus_per_member=2, name=name, submitted_at=T0.timestamp() - 30, scheduler=scheduler,
        admission_gaps=(gap,) if gaps else (),
    )


def _ingest(orchestrator, *workloads):
    return ingest_snapshot(orchestrator, Snapshot("k8s-a", OrchestratorKind.KUBERNETES, T0, (), tuple(workloads)))


def test_a_teams_pod_without_a_decision_is_recorded_as_bypassed_with_what_it_asked_for(k8s, teams):
    _ingest(k8s, _pod_workload("raw", scheduler="my-scheduler"), _pod_workload("routed", gaps=False))
    finding = AdmissionDecision.objects.get()
    assert (finding.bypassed, finding.namespace, finding.name, finding.uid) == (True, "nlp", "raw", "uid-raw")
    assert (finding.team.slug, finding.pool, finding.scheduler, finding.kind) == ("nlp", "k8s-a", "my-scheduler", "Pod")
    assert finding.message.startswith("admission bypassed")
    assert "my-scheduler" in finding.reasons[1]


def test_the_same_pod_seen_again_next_round_is_not_recorded_twice(k8s, teams):
    _ingest(k8s, _pod_workload("raw"))
    _ingest(k8s, _pod_workload("raw"), _pod_workload("later"))
    assert sorted(AdmissionDecision.objects.values_list("name", flat=True)) == ["later", "raw"]


def test_a_pod_of_no_known_team_is_no_finding(k8s, teams):
    _ingest(k8s, _pod_workload("stray", team="kube-system"))
    assert not AdmissionDecision.objects.exists()


def test_the_governance_page_shows_bypassed_pods_apart_from_the_webhooks_answers(k8s, teams, cast, client):
    AdmissionDecision.objects.create(uid="r-1", namespace="nlp", name="answered", kind="Pod", team=teams["nlp"],
                                     allowed=True, patched=True, scheduler="volcano", pool="k8s-a")
    _ingest(k8s, _pod_workload("raw"))
    client.force_login(cast["admin"])
    page = client.get("/governance/").content.decode()
    bypassed, answers = page.split('id="admission"')[1].split("Latest decisions of the webhook")
    assert "nlp/raw" in bypassed and "bypassed" in bypassed and "nlp/answered" not in bypassed
    assert "nlp/answered" in answers and "nlp/raw" not in answers


def test_the_api_lists_bypass_findings_to_those_who_see_the_team(k8s, teams, cast, client):
    _ingest(k8s, _pod_workload("raw"))
    AdmissionDecision.objects.create(uid="r-1", namespace="nlp", name="answered", kind="Pod", team=teams["nlp"],
                                     allowed=True)
    client.force_login(cast["researcher"])  # a member of nlp
    rows = client.get("/api/v1/admission/decisions/", {"bypassed": "true"}).json()["results"]
    assert [(r["name"], r["team"], r["bypassed"], r["scheduler"]) for r in rows] == [
        ("raw", "nlp", True, "default-scheduler")]
    client.force_login(cast["outsider"])  # production only
    assert client.get("/api/v1/admission/decisions/").json()["results"] == []
    client.force_login(cast["admin"])
    assert client.get("/api/v1/admission/decisions/", {"team": "nope"}).status_code == 400
