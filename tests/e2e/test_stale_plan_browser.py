"""Issue 33 item 6: a rebalance plan is approved on today's facts. Proposed with a node idle (drain cost 0),
it is checked against the latest round at approval: the node now holds GPUs, so the page says what changed,
a plain approval is refused, and an approval that ticks "on today's facts" restates the drain cost."""

import pytest

pytestmark = pytest.mark.browser


@pytest.fixture
def plan_on_an_idle_node_that_filled(federation):
    """A plan moving an idle ray-sweeps node (as the rebalancer proposes it), then Ray starts 5 GPUs there."""
    from django.utils import timezone

    from scheduling.models import Node, NodeMove, Orchestrator, RebalancePlan, Workload

    ray, k8s = Orchestrator.objects.get(name="ray-sweeps"), Orchestrator.objects.get(name="k8s-serving")
    node = Node.objects.filter(orchestrator=ray).order_by("name").last()
    Workload.objects.filter(orchestrator=ray, state=Workload.State.RUNNING).delete()  # only the job placed below
    Node.objects.filter(pk=node.pk).update(gpu_allocated=0, state=Node.State.IDLE)
    plan = RebalancePlan.objects.create(
        dry_run=False, reason="8 GPUs ray-sweeps -> k8s-serving", expected_effect={"held_gpus": {node.name: 0}}
    )
    NodeMove.objects.create(plan=plan, node=node, source=ray, target=k8s, drain_cost_gpu_s=0, reason="idle node")
    now = timezone.now()
    Node.objects.filter(pk=node.pk).update(gpu_allocated=5, state=Node.State.MIXED)
    Workload.objects.create(
        orchestrator=ray, external_id="raysubmit_sweep42", gang_size=1, gpus_per_member=5,
        state=Workload.State.RUNNING, submitted_at=now, started_at=now - timezone.timedelta(minutes=10),
        nodes=[{"node": node.name, "gpus": [0, 1, 2, 3, 4]}],
    )
    return plan, node


def test_approval_rechecks_the_plan_and_says_what_changed(session, plan_on_an_idle_node_that_filled, monkeypatch):
    from scheduling import tasks
    from scheduling.models import RebalancePlan

    queued: list[int] = []
    monkeypatch.setattr(tasks.apply_plan_step, "delay", queued.append)  # the worker is not what is tested here
    plan, node = plan_on_an_idle_node_that_filled
    admin = session()
    admin.log_in("admin", "admin")
    page = admin.go(f"/rebalance/{plan.pk}/")
    changed = page.locator("#changed-since").inner_text()
    assert f"{node.name} was idle when proposed and holds 5 of 8 GPUs now" in changed
    assert "draining it loses 0.8 GPU-h, not 0.0" in changed  # 5 GPUs x 10 minutes of preemptible work

    page.get_by_label("Reason (audited)").fill("k8s-serving floor at 9")
    page.get_by_role("button", name="Approve").click()
    page.wait_for_url(f"{admin.base_url}/rebalance/{plan.pk}/")
    assert f"Changed since {plan} was proposed: {node.name} was idle" in page.locator(".message.error").inner_text()
    plan.refresh_from_db()
    assert plan.state == RebalancePlan.State.PROPOSED and queued == []

    page.get_by_label("Reason (audited)").fill("k8s-serving floor at 9")
    page.get_by_label("Approve on today's facts").check()
    page.get_by_role("button", name="Approve").click()
    page.wait_for_url(f"{admin.base_url}/rebalance/")
    plan.refresh_from_db()
    assert plan.state == RebalancePlan.State.APPROVED and queued == [plan.pk]
    assert "approved on changed facts" in plan.history.first().history_change_reason
    move = plan.moves.get()
    assert move.drain_cost_gpu_s == pytest.approx(5 * 600, rel=0.05) and "at approval: holds 5 GPUs" in move.reason
    moves = admin.go(f"/rebalance/{plan.pk}/").locator("#moves").inner_text()
    assert "idle node; at approval: holds 5 GPUs" in moves
    assert admin.errors == []
