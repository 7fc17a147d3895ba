"""Approval re-checks a proposed plan against the latest round (services/rebalance.recheck_plan): a plan on
unchanged facts is approved as before; a node that filled, changed owner or went down is named, and an approval
that has not read it is refused with nothing decided."""

import pytest
from django.core.exceptions import ValidationError

from scheduling.models import Node, RebalancePlan
from scheduling.services import rebalance

from .conftest import MONDAY_9

pytestmark = pytest.mark.django_db


@pytest.fixture
def plan(federation, inference_floor):
    plan = rebalance.propose_plan(MONDAY_9).plan
    assert plan is not None and set(plan.expected_effect["held_gpus"].values()) == {0}  # idle slurm nodes
    return plan


def test_a_plan_on_unchanged_facts_is_approved_as_before(plan, cast):
    assert rebalance.recheck_plan(plan) == []
    assert rebalance.approve_plan(plan, by=cast["admin"], reason="9 AM").state == RebalancePlan.State.APPROVED


def test_a_node_that_changed_owner_or_went_down_is_named_and_the_approval_refused(plan, cast, federation):
    first, second = (m.node for m in plan.moves.order_by("node__name"))
    Node.objects.filter(pk=first.pk).update(orchestrator=federation["orchs"]["ray-sweeps"])
    Node.objects.filter(pk=second.pk).update(state=Node.State.DOWN)
    changes = rebalance.recheck_plan(plan)
    assert changes[0].startswith(f"{first.name} belongs to ray-sweeps now, not slurm-hpc")
    assert changes[1].startswith(f"{second.name} is down now")
    with pytest.raises(ValidationError) as refused:
        rebalance.approve_plan(plan, by=cast["admin"], reason="9 AM")
    assert f"Changed since {plan} was proposed: {first.name} belongs to ray-sweeps" in refused.value.messages[0]
    plan.refresh_from_db()
    assert plan.state == RebalancePlan.State.PROPOSED
    approved = rebalance.approve_plan(plan, by=cast["admin"], reason="9 AM", accept_changes=True)
    assert approved.state == RebalancePlan.State.APPROVED
    assert approved.history.first().history_change_reason.startswith("9 AM (approved on changed facts: ")
