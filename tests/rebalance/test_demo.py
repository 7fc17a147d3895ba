"""The embedded demo federation rebalances live: a plan's nodes drain (the stepper stops placing on them),
change owner once empty, and the next demo round schedules on them for their new orchestrator."""

from datetime import time, timedelta

import pytest
from django.utils import timezone

from scheduling.models import Node, Orchestrator, PoolPolicy, RebalancePlan
from scheduling.selectors.rebalance import split_history
from scheduling.services import demo, rebalance

pytestmark = pytest.mark.django_db


def test_an_approved_plan_moves_demo_nodes_between_rounds_until_it_is_applied(cast):
    demo.create_demo_federation()
    demo.fill_history(days=0.1, step_s=600)
    ray = Orchestrator.objects.get(name="ray-sweeps")
    PoolPolicy.objects.create(
        orchestrator=ray,
        name="overnight sweeps",
        weekdays=list(range(1, 8)),
        start_time=time(0),
        end_time=time(0),
        floor_gpus=96,
    )
    plan = rebalance.propose_plan().plan
    assert plan is not None and not plan.dry_run
    rebalance.approve_plan(plan, by=cast["admin"], reason="Ray sweeps overnight")
    # Demand follows the wall clock, so a plan may also serve another pool; each move must land where it said.
    targets = dict(plan.moves.values_list("node__name", "target__name"))
    now = timezone.now()
    for minute in range(1, 200):
        outcome = rebalance.apply_step(plan.pk)
        if outcome.finished:
            break
        demo.run_demo_round(now + timedelta(minutes=minute * 10))  # jobs on draining nodes finish meanwhile
    assert outcome.plan_state == RebalancePlan.State.APPLIED, outcome
    assert dict(Node.objects.filter(name__in=targets).values_list("name", "orchestrator__name")) == targets
    to_ray = sum(1 for target in targets.values() if target == "ray-sweeps")
    assert to_ray >= 2 and Node.objects.filter(orchestrator=ray).count() == 10 + to_ray  # 96-GPU floor met


def test_the_page_shows_owned_vs_target_per_hour_from_the_demo_rollups(client, cast):
    from django.urls import reverse

    demo.create_demo_federation()
    demo.fill_history(days=0.2, step_s=600)
    now = timezone.now()
    points = split_history(now - timedelta(hours=24), now)
    assert points and {p.orchestrator for p in points} == {"slurm-hpc", "k8s-serving", "ray-sweeps"}
    hour = max(p.at for p in points)
    owned = {p.orchestrator: round(p.owned) for p in points if p.at == hour}
    assert sum(owned.values()) == 320
    client.force_login(cast["researcher"])
    body = client.get(reverse("rebalance")).content.decode()
    assert "owns / target" in body and "No hourly samples" not in body
