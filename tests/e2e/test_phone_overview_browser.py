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


def _overlap(a, b) -> bool:
    return (
        a["x"] < b["x"] + b["width"]
        and b["x"] < a["x"] + a["width"]
        and a["y"] < b["y"] + b["height"]
        and (b["y"] < a["y"] + a["height"])
    )


def test_on_a_phone_rotated_chart_labels_never_overlap_a_legend(session, federation):
    admin = session(width=390)
    admin.log_in("admin", "admin")
    page = admin.go("/utilisation/")
    page.wait_for_selector(".js-plotly-plot .legend")
    checked = 0
    for chart in page.locator(".js-plotly-plot").all():
        legend = chart.locator(".legend")
        if legend.count() == 0:
            continue
        box = legend.first.bounding_box()
        labels = chart.locator(".xtick text, .g-xtitle text").all()
        assert labels, "a chart with a legend has x labels"
        assert not any(_overlap(box, label.bounding_box()) for label in labels)
        checked += 1
    assert checked >= 2 and admin.errors == []
