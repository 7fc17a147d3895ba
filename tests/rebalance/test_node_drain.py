"""An admin's drain of one node (issue #33 item 17) goes through the rebalance plan and its approval: proposed,
approved with a reason, applied by the same steps (release, wait until empty, verify), the owner unchanged; and the
node page's reads (its jobs, as each reader may see them)."""

import pytest
from django.core.exceptions import PermissionDenied, ValidationError

from scheduling.models import Membership, Node, NodeMove, RebalancePlan, Team
from scheduling.selectors.nodes import gpus_on, jobs_on
from scheduling.services import node_drain, rebalance

from .conftest import MONDAY_9, run_on

pytestmark = pytest.mark.django_db


def test_a_drain_is_a_proposed_plan_of_one_move_that_keeps_its_owner(federation, cast):
    node = federation["nodes"]["slurm0"]
    plan = node_drain.propose_drain(node, by=cast["admin"], reason="GPU 3 throws XID 79")
    move = plan.moves.get()
    assert plan.state == RebalancePlan.State.PROPOSED and move.drains_only
    assert (move.source.name, move.target.name) == ("slurm-hpc", "slurm-hpc")
    assert plan.history.get().history_change_reason == "drain of slurm0 proposed: GPU 3 throws XID 79"
    assert Node.objects.get(pk=node.pk).state == Node.State.IDLE  # nothing happens before the approval


def test_only_an_admin_drains_with_a_reason_and_one_plan_at_a_time(federation, cast):
    node = federation["nodes"]["slurm0"]
    with pytest.raises(PermissionDenied):
        node_drain.propose_drain(node, by=cast["lead"], reason="mine")
    with pytest.raises(ValidationError, match="A reason is required"):
        node_drain.propose_drain(node, by=cast["admin"], reason="  ")
    node_drain.propose_drain(node, by=cast["admin"], reason="XID 79")
    with pytest.raises(ValidationError, match="still open: one plan at a time"):
        node_drain.propose_drain(federation["nodes"]["slurm1"], by=cast["admin"], reason="another")


def test_approved_the_drain_releases_the_node_waits_for_its_job_and_leaves_it_drained(federation, cast):
    node = federation["nodes"]["slurm0"]
    job = run_on(node, 8, federation["orchs"]["slurm-hpc"])
    plan = node_drain.propose_drain(node, by=cast["admin"], reason="XID 79")
    rebalance.approve_plan(plan, by=cast["admin"], reason="replace the GPU")
    assert not rebalance.apply_step(plan.pk, MONDAY_9).finished
    assert Node.objects.get(pk=node.pk).state == Node.State.DRAINING  # no new work; the job runs on
    assert not rebalance.apply_step(plan.pk, MONDAY_9).finished
    job.state = job.State.COMPLETED
    job.save()
    Node.objects.filter(pk=node.pk).update(gpu_allocated=0)
    rebalance.apply_step(plan.pk, MONDAY_9)
    outcome = rebalance.apply_step(plan.pk, MONDAY_9)
    drained = Node.objects.select_related("orchestrator").get(pk=node.pk)
    assert outcome.plan_state == RebalancePlan.State.APPLIED, outcome
    assert (drained.state, drained.orchestrator.name) == (Node.State.DRAINED, "slurm-hpc")
    assert plan.moves.get().state == NodeMove.State.MOVED


def test_a_dry_run_drain_records_the_release_and_no_take(federation, cast):
    slurm = federation["orchs"]["slurm-hpc"]
    slurm.endpoint, slurm.options = "https://slurm.example:6820", {"rebalance": {"dry_run": True}}
    slurm.save()
    plan = node_drain.propose_drain(federation["nodes"]["slurm0"], by=cast["admin"], reason="XID 79")
    assert plan.dry_run
    rebalance.approve_plan(plan, by=cast["admin"], reason="see the command first")
    assert rebalance.apply_step(plan.pk, MONDAY_9).plan_state == RebalancePlan.State.APPLIED
    (action,) = RebalancePlan.objects.get(pk=plan.pk).expected_effect["dry_run_actions"]
    assert action["node"] == "slurm0" and "take" not in action and "drain" in action["release"].lower()
    assert Node.objects.get(name="slurm0").state == Node.State.IDLE


def test_the_node_page_names_the_jobs_a_reader_may_see_and_sums_the_rest(federation, cast, teams):
    slurm, node = federation["orchs"]["slurm-hpc"], federation["nodes"]["slurm0"]
    mine = run_on(node, 4, slurm, job="rita-1")
    mine.team, mine.user = teams["nlp"], "rita"
    mine.save()
    theirs = run_on(node, 4, slurm, job="otto-1")
    theirs.team, theirs.user = teams["production"], "otto"
    theirs.save()
    run_on(federation["nodes"]["slurm1"], 8, slurm, job="elsewhere")
    seen = jobs_on(node, cast["researcher"])
    assert [j.workload.external_id for j in seen.shown] == ["rita-1"]
    assert (seen.hidden_jobs, seen.hidden_gpus) == (1, 4)
    assert {j.workload.external_id for j in jobs_on(node, cast["admin"]).shown} == {"rita-1", "otto-1"}
    assert Membership.objects.filter(user=cast["researcher"], team=Team.objects.get(slug="nlp")).exists()


def test_gpus_on_reads_recorded_gpus_and_lays_out_named_hosts_round_robin(federation):
    job = run_on(federation["nodes"]["slurm0"], 8, federation["orchs"]["slurm-hpc"])
    assert gpus_on(job, "slurm0") == 8 and gpus_on(job, "slurm1") == 0
    job.nodes, job.gang_size, job.gpus_per_member = ["slurm0", "slurm1"], 3, 4
    assert (gpus_on(job, "slurm0"), gpus_on(job, "slurm1"), gpus_on(job, "slurm10")) == (8, 4, 0)
