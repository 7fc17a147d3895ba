"""The Celery adapters: proposing queues the apply of an auto-approved plan, and re-queues open plans."""

import pytest

from scheduling import tasks
from scheduling.models import Orchestrator, RebalancePlan
from scheduling.services import rebalance

from .conftest import MONDAY_9

pytestmark = pytest.mark.django_db


def test_proposing_an_auto_applied_plan_queues_its_apply_and_a_later_round_requeues_it(
    federation, inference_floor, monkeypatch
):
    Orchestrator.objects.update(options={"rebalance": {"auto_apply": True}})
    queued: list[int] = []
    monkeypatch.setattr(tasks.apply_plan_step, "delay", queued.append)
    plan = rebalance.propose_plan(MONDAY_9).plan
    assert plan.state == RebalancePlan.State.APPROVED
    result = tasks.propose_rebalance()
    assert queued == [plan.pk] and result["plan"] is None and "still open" in result["skipped"]


def test_apply_plan_step_requeues_itself_until_the_plan_finishes(federation, inference_floor, cast, monkeypatch):
    plan = rebalance.approve_plan(rebalance.propose_plan(MONDAY_9).plan, by=cast["admin"], reason="go")
    later: list[tuple] = []
    monkeypatch.setattr(tasks.apply_plan_step, "apply_async", lambda args, countdown: later.append((args, countdown)))
    result = tasks.apply_plan_step(plan.pk)
    assert result["state"] == RebalancePlan.State.APPLYING and not result["finished"]
    assert later == [((plan.pk,), rebalance.rebalance_settings()["step_retry_s"])]
