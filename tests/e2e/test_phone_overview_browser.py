"""On a phone (390 px) the overview's "Latest rebalance" rows stay short: a move's reason squeezed into the
last column made each row ~300 px tall."""

import pytest

from scheduling.models import Node, NodeMove, Orchestrator, RebalancePlan

pytestmark = pytest.mark.browser

WHY = "empty node first: moves with no drain; kubernetes needs 32 more GPUs than its pool of 64 for its pending demand"


def test_on_a_phone_the_latest_rebalance_rows_are_short(session, federation):
    source, target = Orchestrator.objects.order_by("name")[:2]
    plan = RebalancePlan.objects.create(reason="demand exceeds the pool")
    for node in Node.objects.filter(orchestrator=source)[:3]:
        NodeMove.objects.create(plan=plan, node=node, source=source, target=target, drain_cost_gpu_s=0, reason=WHY)
    admin = session(width=390)
    admin.log_in("admin", "admin")
    rows = admin.go("/").locator("#latest-moves tbody tr")
    assert rows.count() == 3
    heights = [rows.nth(i).bounding_box()["height"] for i in range(3)]
    assert max(heights) < 120, heights
    assert admin.errors == []
