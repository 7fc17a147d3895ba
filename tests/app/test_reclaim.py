"""Reclaim rounds from the database (issue 31, item 3): the engine's inputs from the last collect round, plans in
review mode, an admin's decision through the API, what applying records. The levers themselves run live
(tests/governance_live/test_reclaim_live.py, tests/k8s_live/test_reclaim_live.py); here they are dry runs."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from django.core.exceptions import ValidationError
from django.utils import timezone

from scheduling import tasks
from scheduling.collectors.snapshot import ObservedNode, ObservedWorkload, Snapshot, WorkloadState
from scheduling.engine.governance_types import KueueClusterQueue
from scheduling.engine.types import OrchestratorKind
from scheduling.models import AppliedObject, EntitlementShare, Node, Orchestrator, Queue, ReclaimPlan, Team, Workload
from scheduling.selectors.reclaim import guarantees_by_orchestrator, reclaim_inputs
from scheduling.services import reclaim
from scheduling.services.enforcement.decisions import to_json
from scheduling.services.ingest import ingest_snapshot

HOUR_AGO = timedelta(hours=1)


@pytest.fixture
def borrowed(db, cast):
    """hpc (2 x 8 GPUs): recsys runs two 8-GPU jobs, nlp (8 guaranteed) waits 10 minutes for 8."""
    now = timezone.now()
    hpc = Orchestrator.objects.create(
        name="hpc", kind="slurm", endpoint="https://hpc.example:6820",
        options={"reclaim": {"mode": "review", "dry_run": True, "grace_s": 300, "min_runtime_s": 600}},
    )
    for name in ("n1", "n2"):
        Node.objects.create(orchestrator=hpc, name=name, gpu_model="H100", gpu_total=8, gpu_allocated=8)
    recsys = Team.objects.create(slug="recsys", name="Recsys")
    Queue.objects.create(team=recsys, weight=Decimal(10), guaranteed=0, burst_limit=16)
    nlp = Team.objects.get(slug="nlp")
    Queue.objects.create(team=nlp, weight=Decimal(100), guaranteed=8, burst_limit=16)
    for job, node in (("101", "n1"), ("102", "n2")):
        Workload.objects.create(orchestrator=hpc, external_id=job, team=recsys, gang_size=1, gpus_per_member=8,
                                state=Workload.State.RUNNING, submitted_at=now - HOUR_AGO,
                                started_at=now - HOUR_AGO + timedelta(seconds=int(job)), nodes=[{"node": node}])
    Workload.objects.create(orchestrator=hpc, external_id="200", team=nlp, gang_size=1, gpus_per_member=8,
                            state=Workload.State.PENDING, submitted_at=now - timedelta(minutes=10))
    return hpc


def test_the_engine_reads_the_last_round_with_one_gpu_per_index(borrowed) -> None:
    inputs = reclaim_inputs(borrowed)
    assert [(w.id, w.team, w.assignments[0].gpu_indices) for w in inputs.running] == [
        ("101", "recsys", tuple(range(8))), ("102", "recsys", tuple(range(8)))]
    assert [(r.id, r.team, r.gpus) for r in inputs.pending] == [("200", "nlp", 8.0)]
    assert all(node.gpu_free_whole == 0 for node in inputs.nodes)


def test_before_any_split_guarantees_are_the_fleet_copy_with_grants_in_force(borrowed) -> None:
    assert guarantees_by_orchestrator([borrowed], timezone.now())[borrowed.pk] == {"nlp": 8.0}


def test_once_split_each_team_keeps_its_own_share_there_less_its_sub_teams(borrowed) -> None:
    """research holds 12 on hpc of which its sub-team nlp's 5 are nlp's own: research claims 7, nlp 5, and a
    second orchestrator keeps its own split (another model there adds to the same team)."""
    now = timezone.now()
    other = Orchestrator.objects.create(name="k8s", kind="kubernetes", endpoint="https://k8s.example:6443")
    research, nlp = Team.objects.get(slug="research"), Team.objects.get(slug="nlp")
    share = {"computed_at": now, "cap": 16}
    EntitlementShare.objects.create(team=research, orchestrator=borrowed, gpu_model="H100", guarantee=12, **share)
    EntitlementShare.objects.create(team=nlp, orchestrator=borrowed, gpu_model="H100", guarantee=5, **share)
    EntitlementShare.objects.create(team=nlp, orchestrator=other, gpu_model="A100", guarantee=2, **share)
    EntitlementShare.objects.create(team=nlp, orchestrator=other, gpu_model="L4", guarantee=1, **share)
    split = guarantees_by_orchestrator([borrowed, other], now)
    assert split == {borrowed.pk: {"research": 7.0, "nlp": 5.0}, other.pk: {"nlp": 3.0}}


def test_a_review_round_stores_a_plan_with_its_cause_and_the_newer_one_supersedes_it(borrowed) -> None:
    first = reclaim.reclaim_round(borrowed.pk)
    assert first is not None and first.state == ReclaimPlan.State.PENDING
    [claim] = first.reclaims
    assert claim["cause"].startswith("nlp held 0 of its 8 guaranteed GPUs; 200 (8 GPUs) waited 6")
    assert [v["workload_id"] for v in claim["victims"]] == ["102"]  # the newest: least work lost
    second = reclaim.reclaim_round(borrowed.pk)
    first.refresh_from_db()
    assert first.state == ReclaimPlan.State.SUPERSEDED and second.state == ReclaimPlan.State.PENDING


def test_nothing_is_planned_inside_the_grace_or_when_reclaim_is_off(borrowed) -> None:
    assert reclaim.reclaim_round(borrowed.pk, now=timezone.now() - timedelta(minutes=6)) is None
    borrowed.options = {"reclaim": {"mode": "off"}}
    borrowed.save()
    assert reclaim.reclaim_round(borrowed.pk) is None
    assert not ReclaimPlan.objects.exists()


def test_an_admin_approves_through_the_api_and_the_apply_task_records_the_requeue(borrowed, cast, client,
                                                                                  monkeypatch) -> None:
    plan = reclaim.reclaim_round(borrowed.pk)
    queued: list[int] = []
    monkeypatch.setattr(tasks.apply_reclaim_plan, "delay", queued.append)
    client.force_login(cast["researcher"])
    refused = client.post(f"/api/v1/reclaim-plans/{plan.pk}/approve/", {"reason": "mine"},
                          content_type="application/json")
    assert refused.status_code == 403 and queued == []
    client.force_login(cast["admin"])
    answer = client.post(f"/api/v1/reclaim-plans/{plan.pk}/approve/", {"reason": "nlp's guarantee"},
                         content_type="application/json")
    assert answer.status_code == 200 and answer.json()["state"] == "approved" and queued == [plan.pk]
    tasks.apply_reclaim_plan(plan.pk)
    plan.refresh_from_db()
    assert plan.state == ReclaimPlan.State.APPLIED
    assert [(a["victim"], a["verb"], a["dry_run"], a["request"]) for a in plan.actions] == [
        ("102", "requeue", True, "scontrol requeue 102")]
    assert plan.history.filter(history_user=cast["admin"], history_change_reason="nlp's guarantee").exists()


def test_applying_skips_an_owner_that_no_longer_waits(borrowed) -> None:
    plan = reclaim.reclaim_round(borrowed.pk)
    plan.state = ReclaimPlan.State.APPROVED
    plan.save()
    Workload.objects.filter(external_id="200").update(state=Workload.State.RUNNING)
    plan = reclaim.apply_reclaim_plan(plan.pk)
    assert [a["verb"] for a in plan.actions] == ["skip"] and "no longer waits" in plan.actions[0]["message"]


def test_a_pending_plan_needs_a_reason_and_is_decided_once(borrowed, cast) -> None:
    plan = reclaim.reclaim_round(borrowed.pk)
    with pytest.raises(ValidationError, match="reason"):
        reclaim.reject_reclaim_plan(plan.pk, by=cast["admin"], reason=" ")
    reclaim.reject_reclaim_plan(plan.pk, by=cast["admin"], reason="recsys demo today")
    with pytest.raises(ValidationError, match="only a pending plan"):
        reclaim.approve_reclaim_plan(plan.pk, by=cast["admin"], reason="changed my mind")


def test_the_reclaim_options_are_checked_on_save(db) -> None:
    bad = Orchestrator(name="x", kind="slurm", endpoint="https://x.example", options={"reclaim": {"mode": "now"}})
    with pytest.raises(ValidationError, match=r"options\.reclaim\.mode"):
        bad.full_clean()
    bad.options = {"reclaim": {"grace_s": -1}}
    with pytest.raises(ValidationError, match=r"options\.reclaim\.grace_s"):
        bad.full_clean()
    bad.options = {"reclaim": {"borrow_qos": "scavenger; drop"}}
    with pytest.raises(ValidationError, match=r"options\.reclaim\.borrow_qos"):
        bad.full_clean()


@pytest.fixture
def ray_borrowed(db, cast):
    """ray (3 x 8 GPUs) as a collect round ingests it: recsys's submitted job raysubmit_b holds two 8-GPU placement
    groups, a driver recsys started by hand holds 8 more; nlp (16 guaranteed) waits with a gang of 2 x 8 GPUs (a job
    is stopped whole, so its GPUs must not exceed what the owner waits for)."""
    now = timezone.now()
    ray = Orchestrator.objects.create(name="ray", kind="ray", endpoint="http://ray.example:8265",
                                      options={"reclaim": {"mode": "auto", "dry_run": True, "grace_s": 0,
                                                           "min_runtime_s": 0}})
    recsys = Team.objects.create(slug="recsys", name="Recsys")
    Queue.objects.create(team=recsys, weight=Decimal(10), guaranteed=0, burst_limit=24)
    Queue.objects.create(team=Team.objects.get(slug="nlp"), weight=Decimal(100), guaranteed=16, burst_limit=16)
    started = (now - HOUR_AGO).timestamp()

    def group(name: str, node: str, team: str, submission: str, state=WorkloadState.RUNNING) -> ObservedWorkload:
        running = state is WorkloadState.RUNNING
        return ObservedWorkload(external_id=f"pg:{name}", orchestrator="ray", team=team, state=state,
                                gang_size=1 if running else 2, gpus_per_member=8.0, submitted_at=started,
                                started_at=started if running else None, nodes=(node,) if running else (),
                                submission_id=submission)

    snapshot = Snapshot("ray", OrchestratorKind.RAY, now,
                        nodes=tuple(ObservedNode(n, "ray", 8, 8, gpu_model="H100") for n in ("r1", "r2", "r3")),
                        workloads=(group("b1", "r1", "recsys", "raysubmit_b"),
                                   group("b2", "r2", "recsys", "raysubmit_b"), group("hand", "r3", "recsys", ""),
                                   group("owner", "", "nlp", "raysubmit_nlp", WorkloadState.PENDING)))
    ingest_snapshot(ray, snapshot)
    return ray


def test_ray_workload_rows_keep_their_jobs_submission_id_from_the_collect_round(ray_borrowed) -> None:
    rows = dict(Workload.objects.filter(orchestrator=ray_borrowed).values_list("external_id", "submission_id"))
    assert rows == {"pg:b1": "raysubmit_b", "pg:b2": "raysubmit_b", "pg:hand": "", "pg:owner": "raysubmit_nlp"}


def test_on_ray_a_borrowers_job_is_one_victim_stopped_whole_by_its_submission_id(ray_borrowed) -> None:
    """Both groups of raysubmit_b go as one gang (the Jobs API stops the job, not a group); the hand-started
    driver is never a victim (nothing can stop it)."""
    inputs = reclaim_inputs(ray_borrowed)
    assert {(w.id, w.gang_id, w.preemptible) for w in inputs.running} == {
        ("pg:b1", "raysubmit_b", True), ("pg:b2", "raysubmit_b", True), ("pg:hand", "pg:hand", False)}
    plan = reclaim.reclaim_round(ray_borrowed.pk)
    assert plan is not None and plan.state == ReclaimPlan.State.APPLIED, plan and plan.error
    [claim] = plan.reclaims
    assert {v["workload_id"] for v in claim["victims"]} == {"pg:b1", "pg:b2"}
    assert [(a["victim"], a["verb"], a["dry_run"], a["request"]) for a in plan.actions] == [
        ("raysubmit_b", "stop", True, "POST /api/jobs/raysubmit_b/stop")]


def test_native_mode_on_ray_falls_back_to_the_portals_own_reclaim_and_says_so(ray_borrowed, cast, client) -> None:
    ray_borrowed.options = {"reclaim": {**ray_borrowed.options["reclaim"], "mode": "native"}}
    ray_borrowed.save()
    plan = reclaim.reclaim_round(ray_borrowed.pk)
    assert (plan.mode, plan.state) == ("native", ReclaimPlan.State.APPLIED)
    assert plan.reason == "native mode: Ray has no native reclaim, so the portal reclaimed itself (as in auto mode)"
    assert [a["victim"] for a in plan.actions] == ["raysubmit_b"]
    client.force_login(cast["admin"])
    page = client.get("/reclaim/").content.decode()
    assert "Ray has no native reclaim, so the portal reclaimed itself" in page and "stop raysubmit_b" in page


def test_native_mode_on_a_slurm_whose_preemption_cannot_be_read_is_reclaimed_by_the_portal_saying_why(
        borrowed, tmp_path) -> None:
    """slurmctld is not reachable through this slurm.conf: native reclaim cannot be known to be in force, so the
    portal requeues (a dry run here) and the plan names why. The QOS path itself runs live
    (tests/governance_live/test_reclaim_live.py)."""
    borrowed.options = {"slurm_conf": str(tmp_path / "missing.conf"),
                        "reclaim": {**borrowed.options["reclaim"], "mode": "native"}}
    borrowed.save()
    plan = reclaim.reclaim_round(borrowed.pk)
    assert (plan.mode, plan.state) == ("native", ReclaimPlan.State.APPLIED)
    assert plan.reason.startswith("native mode: ") and plan.reason.endswith(
        "so the portal reclaimed itself (as in auto mode)")
    assert [(a["verb"], a["victim"]) for a in plan.actions] == [("requeue", "102")]


def test_native_mode_on_kubernetes_without_volcano_falls_back_and_with_volcano_is_left_to_it(db) -> None:
    plain = Orchestrator(name="k", kind="kubernetes", endpoint="https://k.example",
                         options={"governance": {"volcano": False}})
    volcano = Orchestrator(name="v", kind="kubernetes", endpoint="https://v.example")
    assert reclaim.native_lever(plain) == "" and reclaim.native_lever(volcano) == "Volcano's reclaim action"
    assert "Kubernetes without Volcano has no native reclaim" in reclaim.native_fallback_note(plain)


def test_a_native_rounds_qos_writes_read_as_a_count_on_the_reclaim_page(db, cast, client) -> None:
    hpc = Orchestrator.objects.create(name="hpc", kind="slurm", endpoint="https://hpc.example:6820")
    names = ("scavenger", "nlp-guaranteed", "vision-guaranteed")
    writes = [{"victim": "", "verb": "qos", "changed": True, "dry_run": False, "request": f"sacctmgr -i add qos {name}",
               "message": "native reclaim's QOS written"} for name in names]
    ReclaimPlan.objects.create(orchestrator=hpc, created_at=timezone.now(), mode="native",
                               state=ReclaimPlan.State.NATIVE, actions=writes, reason="native reclaim on hpc")
    client.force_login(cast["admin"])
    page = client.get("/reclaim/").content.decode()
    assert "3 QOS writes" in page and "Left to the orchestrator" in page and "qos;" not in page


def test_a_native_round_on_kueue_records_that_kueue_reclaims_only_where_the_queue_says_so(borrowed) -> None:
    """Native mode leaves the eviction to Kueue on a cluster where governance wrote Kueue ClusterQueues: the plan
    says so for an owner whose queue carries reclaimWithinCohort Any, and that nothing reclaims where it does not."""
    Orchestrator.objects.filter(pk=borrowed.pk).update(
        kind="kubernetes", options={"reclaim": {"mode": "native", "grace_s": 300, "min_runtime_s": 600}})

    def written(reclaim_within_cohort: str) -> None:
        queue = KueueClusterQueue("nlp", "gpuportal", "default-flavor", 8, 8, None, reclaim_within_cohort)
        AppliedObject.objects.update_or_create(
            orchestrator=borrowed, object_id="kueue_cluster_queue:nlp",
            defaults={"kind": queue.kind.value, "team": "nlp", "settings": to_json(queue),
                      "applied_at": timezone.now()})

    written("Never")
    plan = reclaim.reclaim_round(borrowed.pk)
    assert plan is not None and plan.state == ReclaimPlan.State.NATIVE and not plan.actions
    assert plan.reason == ("native mode: left to Kueue's reclaimWithinCohort (no native reclaim in force for nlp: no "
                           "ClusterQueue nlp with reclaimWithinCohort Any written on hpc); recorded, nothing stopped "
                           "by the portal")
    written("Any")
    plan = reclaim.reclaim_round(borrowed.pk)
    assert "(Kueue reclaims for nlp: ClusterQueue nlp has reclaimWithinCohort Any in cohort gpuportal" in plan.reason
    assert "nominal quota of 8" in plan.reason
