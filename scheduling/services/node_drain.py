"""An admin's drain (cordon) of one node, from its page: not a direct action but a rebalance plan of one move
whose target is its source (``NodeMove.drains_only``), so it is proposed, approved or rejected with a reason and
applied by the same audited steps as the rebalancer's plans (``services/rebalance.py``: release in the owner,
wait until empty, verify; roll back on failure). One plan is open at a time, as for the rebalancer."""

from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction

from scheduling.models import Node, NodeMove, Orchestrator, RebalancePlan
from scheduling.selectors.rebalance import OPEN_STATES

from .audit import require_reason, save_audited
from .rebalance import dry_run_for, held_gpus


def propose_drain(node: Node, *, by, reason: str, drain_cost_gpu_s: float = 0.0) -> RebalancePlan:
    """A proposed plan to drain ``node`` on its owner, for an admin to approve on the plan's page."""
    if by is None or not by.has_perm("scheduling.edit_pool_policies"):
        raise PermissionDenied("Only portal admins drain nodes.")
    reason = require_reason(reason)
    with transaction.atomic():
        # The rebalancer's lock: a drain and a proposal cannot both find no open plan and both open one.
        list(Orchestrator.objects.select_for_update().filter(kind__in=Orchestrator.SCHEDULER_KINDS).order_by("pk"))
        node = Node.objects.select_for_update().select_related("orchestrator").get(pk=node.pk)
        if node.state in Node.UNSCHEDULABLE:
            raise ValidationError({"node": f"{node.name} is {node.get_state_display().lower()} already."})
        open_plan = RebalancePlan.objects.filter(state__in=OPEN_STATES).first()
        if open_plan is not None:
            raise ValidationError({"node": f"{open_plan} is still open: one plan at a time; decide it first."})
        owner = node.orchestrator
        plan = RebalancePlan(
            dry_run=dry_run_for(owner),
            reason=f"drain {node.name} on {owner.name}: {reason}",
            # What the node held when proposed: approval re-checks it against the latest round (recheck_plan).
            expected_effect={"drain": node.name, "owner": owner.name, "gpus": node.gpu_total,
                             "held_gpus": held_gpus([node.key])},
        )
        save_audited(plan, by=by, reason=f"drain of {node.name} proposed: {reason}")
        NodeMove.objects.create(
            plan=plan, node=node, source=owner, target=owner, drain_cost_gpu_s=drain_cost_gpu_s,
            reason=f"drain requested by {by.get_username()}: {reason}"[:300],
        )
    return plan
