"""An applying plan whose steps stopped completing is failed by the reaper, its nodes rolled back."""

from datetime import timedelta

import pytest

from scheduling.models import Node, NodeMove, RebalancePlan
from scheduling.services import rebalance

from .conftest import MONDAY_9
from .test_plans import _approved

pytestmark = pytest.mark.django_db
LIMITS = {"plan_after_s": 1800.0}


def test_each_completed_step_stamps_the_plan_heartbeat(federation, inference_floor, cast):
    plan = _approved(cast)
    rebalance.apply_step(plan.pk, MONDAY_9)
    plan.refresh_from_db()
    assert plan.state == RebalancePlan.State.APPLYING and plan.heartbeat_at == MONDAY_9


def test_a_plan_with_no_step_for_long_is_failed_with_the_reason_and_its_nodes_rolled_back(
    federation, inference_floor, cast
):
    plan = _approved(cast)
    rebalance.apply_step(plan.pk, MONDAY_9)  # nodes draining; then the step chain dies
    Node.objects.filter(moves__plan=plan).update(gpu_allocated=8)
    assert rebalance.reap_stale(MONDAY_9 + timedelta(seconds=600), limits=LIMITS) == {"failed": 0}
    assert rebalance.reap_stale(MONDAY_9 + timedelta(hours=1), limits=LIMITS) == {"failed": 1}
    plan.refresh_from_db()
    assert plan.state == RebalancePlan.State.FAILED and "no apply step completed since" in plan.error
    assert set(plan.moves.values_list("state", flat=True)) == {NodeMove.State.ROLLED_BACK}
    assert set(Node.objects.filter(moves__plan=plan).values_list("orchestrator__name", flat=True)) == {"slurm-hpc"}
