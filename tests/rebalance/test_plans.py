"""Rebalance plans: proposal from the database, audited decisions, step-by-step apply on the demo federation,
rollback on failure or timeout, resumption after a crash between steps, dry run."""

from datetime import timedelta

import pytest
from django.core.exceptions import PermissionDenied, ValidationError
from django.utils import timezone

from scheduling.models import Node, NodeMove, Orchestrator, RebalancePlan
from scheduling.services import rebalance

from .conftest import MONDAY_9, run_on

pytestmark = pytest.mark.django_db


def _approved(cast, now=MONDAY_9) -> RebalancePlan:
    plan = rebalance.propose_plan(now).plan
    assert plan is not None
    return rebalance.approve_plan(plan, by=cast["admin"], reason="inference floor at 9 AM")


def _see_round(*nodes: Node, at) -> None:
    Node.objects.filter(pk__in=[n.pk for n in nodes]).update(last_seen_at=at)


def test_a_business_hours_floor_proposes_moving_idle_slurm_nodes_to_kubernetes(federation, inference_floor):
    proposal = rebalance.propose_plan(MONDAY_9)
    moves = list(proposal.plan.moves.select_related("source", "target"))
    assert len(moves) == 2 and {(m.source.name, m.target.name) for m in moves} == {("slurm-hpc", "k8s-serving")}
    assert proposal.plan.state == RebalancePlan.State.PROPOSED and not proposal.plan.dry_run
    effect = proposal.plan.expected_effect
    assert effect["local_time"] == "Mon 09:00" and {t["orchestrator"] for t in effect["targets"]} >= {"k8s-serving"}
    assert "below its floor" in moves[0].reason


def test_no_plan_is_proposed_outside_the_window_when_nobody_waits(federation, inference_floor):
    assert rebalance.propose_plan(MONDAY_9 + timedelta(hours=12)).plan is None


def test_a_second_plan_is_not_proposed_while_one_is_open(federation, inference_floor):
    assert rebalance.propose_plan(MONDAY_9).plan is not None
    again = rebalance.propose_plan(MONDAY_9)
    assert again.plan is None and "still open" in again.skipped


def test_pinned_and_busy_gang_nodes_are_left_out_of_the_plan(federation, inference_floor):
    nodes, orchs = federation["nodes"], federation["orchs"]
    Node.objects.filter(name__in=["slurm0", "slurm1", "slurm2"]).update(pinned=True)
    gang = run_on(nodes["slurm3"], 16, orchs["slurm-hpc"], job="gang", gang=2)
    gang.nodes = [{"node": "slurm3", "gpus": list(range(8))}, {"node": "slurm4", "gpus": list(range(8))}]
    gang.save()
    moves = rebalance.propose_plan(MONDAY_9).plan.moves.filter(source__name="slurm-hpc")
    assert list(moves.values_list("node__name", flat=True)) == ["slurm5"]


def test_approval_and_rejection_are_admin_only_audited_with_who_and_why(federation, inference_floor, cast):
    plan = rebalance.propose_plan(MONDAY_9).plan
    with pytest.raises(PermissionDenied):
        rebalance.approve_plan(plan, by=cast["lead"], reason="looks good")
    with pytest.raises(ValidationError):
        rebalance.reject_plan(plan, by=cast["admin"], reason="")
    rebalance.reject_plan(plan, by=cast["admin"], reason="maintenance window")
    plan.refresh_from_db()
    assert plan.state == RebalancePlan.State.REJECTED and plan.decided_by == cast["admin"]
    version = plan.history.first()
    assert version.history_user == cast["admin"] and version.history_change_reason == "maintenance window"
    with pytest.raises(ValidationError):
        rebalance.approve_plan(plan, by=cast["admin"], reason="changed my mind")


def test_applying_drains_waits_for_the_node_to_empty_moves_ownership_and_verifies_on_the_next_round(
    federation, inference_floor, cast
):
    nodes, orchs = federation["nodes"], federation["orchs"]
    run_on(nodes["slurm0"], 4, orchs["slurm-hpc"])  # keeps slurm0 out; the plan takes idle nodes
    plan = _approved(cast)
    moved = list(plan.moves.values_list("node__name", flat=True))
    assert "slurm0" not in moved
    Node.objects.filter(name=moved[0]).update(gpu_allocated=2)  # work landed before the drain
    step = rebalance.apply_step(plan.pk, MONDAY_9)
    states = set(Node.objects.filter(name__in=moved).values_list("state", flat=True))
    assert not step.finished and states == {"draining"}
    rebalance.apply_step(plan.pk, MONDAY_9)
    first, second = (Node.objects.get(name=n) for n in moved)
    assert first.orchestrator.name == "slurm-hpc" and first.state == "draining"  # still busy: waits
    assert second.orchestrator.name == "k8s-serving" and second.state == "idle"
    Node.objects.filter(name=moved[0]).update(gpu_allocated=0)
    assert not rebalance.apply_step(plan.pk, MONDAY_9).finished  # moved, but no round has seen it yet
    _see_round(first, second, at=timezone.now() + timedelta(minutes=1))
    outcome = rebalance.apply_step(plan.pk, MONDAY_9)
    assert outcome.finished and outcome.plan_state == RebalancePlan.State.APPLIED
    assert set(Node.objects.filter(name__in=moved).values_list("orchestrator__name", flat=True)) == {"k8s-serving"}
    history = Node.objects.get(name=moved[1]).history.first()
    assert history.history_user == cast["admin"] and f"plan #{plan.pk}" in history.history_change_reason


class Exploding(rebalance.DemoVerbs):
    def take(self, node: str) -> str:
        raise OSError("apiserver refused the label")


def test_a_failed_step_rolls_the_node_back_to_its_source_and_fails_the_plan_with_the_reason(
    federation, inference_floor, cast
):
    plan = _approved(cast)
    verbs = lambda orch, dry: (Exploding if orch.kind == "kubernetes" else rebalance.DemoVerbs)(orch, dry)  # noqa: E731
    rebalance.apply_step(plan.pk, MONDAY_9, verbs=verbs)
    outcome = rebalance.apply_step(plan.pk, MONDAY_9, verbs=verbs)
    plan.refresh_from_db()
    assert outcome.finished and plan.state == RebalancePlan.State.FAILED and "apiserver refused" in plan.error
    assert set(plan.moves.values_list("state", flat=True)) == {NodeMove.State.ROLLED_BACK}
    for move in plan.moves.select_related("node"):
        assert move.node.orchestrator.name == "slurm-hpc" and move.node.state == Node.State.IDLE


def test_a_drain_that_outlives_the_timeout_is_rolled_back(federation, inference_floor, cast, settings):
    settings.GPUPORTAL_REBALANCE = {"drain_timeout_s": 60}
    plan = _approved(cast)
    rebalance.apply_step(plan.pk)
    Node.objects.filter(moves__plan=plan).update(gpu_allocated=8)
    outcome = rebalance.apply_step(plan.pk, MONDAY_9 + timedelta(days=365))
    assert outcome.plan_state == RebalancePlan.State.FAILED and "drain timeout" in outcome.message
    assert set(Node.objects.filter(moves__plan=plan).values_list("orchestrator__name", "state")) == {
        ("slurm-hpc", "idle")
    }


class Crash(BaseException):
    pass


def test_a_worker_killed_mid_step_leaves_the_last_committed_state_and_the_next_step_resumes(
    federation, inference_floor, cast
):
    plan = _approved(cast)
    rebalance.apply_step(plan.pk, MONDAY_9)  # both moves draining

    class DiesAfterTaking(rebalance.DemoVerbs):
        def take(self, node: str) -> str:
            super().take(node)
            raise Crash  # the process dies after acting, before the step commits

    with pytest.raises(Crash):
        rebalance.apply_step(plan.pk, MONDAY_9, verbs=lambda o, d: DiesAfterTaking(o, d))
    assert set(plan.moves.values_list("state", flat=True)) == {NodeMove.State.DRAINING}
    rebalance.apply_step(plan.pk, MONDAY_9)
    _see_round(*Node.objects.filter(moves__plan=plan), at=timezone.now() + timedelta(minutes=1))
    assert rebalance.apply_step(plan.pk, MONDAY_9).plan_state == RebalancePlan.State.APPLIED
    assert Node.objects.filter(orchestrator__name="k8s-serving").count() == 3


def test_a_dry_run_plan_records_its_commands_and_changes_nothing(federation, inference_floor, cast):
    Orchestrator.objects.filter(name="slurm-hpc").update(options={"rebalance": {"dry_run": True}})
    plan = _approved(cast)
    assert plan.dry_run
    outcome = rebalance.apply_step(plan.pk, MONDAY_9)
    plan.refresh_from_db()
    assert outcome.plan_state == RebalancePlan.State.APPLIED and len(plan.expected_effect["dry_run_actions"]) == 2
    assert Node.objects.filter(orchestrator__name="k8s-serving").count() == 1
    assert set(plan.moves.values_list("state", flat=True)) == {NodeMove.State.PENDING}


def test_a_plan_between_auto_apply_orchestrators_is_approved_without_an_admin(federation, inference_floor):
    Orchestrator.objects.update(options={"rebalance": {"auto_apply": True}})
    plan = rebalance.propose_plan(MONDAY_9).plan
    assert plan.state == RebalancePlan.State.APPROVED and plan.decided_by is None
    assert plan.history.first().history_change_reason == "auto-approved by pool policy"


def test_a_moved_node_that_is_never_seen_with_its_new_owner_fails_the_plan_after_the_timeout(
    federation, inference_floor, cast, settings
):
    settings.GPUPORTAL_REBALANCE = {"drain_timeout_s": 60}
    plan = _approved(cast)
    rebalance.apply_step(plan.pk, MONDAY_9)
    rebalance.apply_step(plan.pk, MONDAY_9)
    assert set(plan.moves.values_list("state", flat=True)) == {NodeMove.State.MOVED}
    outcome = rebalance.apply_step(plan.pk, timezone.now() + timedelta(minutes=5))
    assert outcome.plan_state == RebalancePlan.State.FAILED and "never confirmed" in outcome.message
    assert rebalance.resumable_plan_ids() == []
