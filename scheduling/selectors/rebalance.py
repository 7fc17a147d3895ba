"""Rebalance plans as pages read them."""



from scheduling.models import (
    NodeMove,
    RebalancePlan,
)


def latest_plan_summary() -> tuple[RebalancePlan | None, list[NodeMove]]:
    plan = RebalancePlan.objects.first()
    if plan is None:
        return None, []
    return plan, list(plan.moves.select_related("node", "source", "target")[:20])
