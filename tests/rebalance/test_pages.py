"""The rebalance pages: who reads, who decides (with a reason, audited), and what the page shows."""

import pytest
from django.urls import reverse

from scheduling.models import RebalancePlan
from scheduling.services import rebalance

from .conftest import MONDAY_9

pytestmark = pytest.mark.django_db


@pytest.fixture
def plan(federation, inference_floor):
    return rebalance.propose_plan(MONDAY_9).plan


@pytest.mark.parametrize("role", ("researcher", "lead", "outsider", "admin"))
def test_every_team_member_and_admin_reads_the_rebalance_pages(client, cast, plan, role):
    client.force_login(cast[role])
    assert client.get(reverse("rebalance")).status_code == 200
    body = client.get(reverse("rebalance-plan", args=[plan.pk])).content.decode()
    assert "slurm-hpc" in body and ('id="approve"' in body) == (role == "admin")


def test_anonymous_visitors_are_sent_to_log_in(client, plan):
    assert client.get(reverse("rebalance")).status_code == 302


def test_a_signed_in_user_in_no_team_gets_403_and_an_unknown_plan_404(client, cast, plan, django_user_model):
    client.force_login(django_user_model.objects.create_user("nobody", password="pw"))
    assert client.get(reverse("rebalance")).status_code == 403
    client.force_login(cast["admin"])
    assert client.get(reverse("rebalance-plan", args=[plan.pk + 999])).status_code == 404


@pytest.mark.parametrize("role", ("researcher", "lead", "outsider"))
def test_only_admins_may_approve_or_reject(client, cast, plan, role):
    client.force_login(cast[role])
    response = client.post(reverse("rebalance-plan", args=[plan.pk]), {"decision": "approve", "reason": "go"})
    assert response.status_code == 403
    plan.refresh_from_db()
    assert plan.state == RebalancePlan.State.PROPOSED


def test_an_admin_rejects_with_a_reason_and_the_history_shows_who_and_why(client, cast, plan):
    client.force_login(cast["admin"])
    refused = client.post(reverse("rebalance-plan", args=[plan.pk]), {"decision": "reject", "reason": ""}, follow=True)
    assert "reason is required" in refused.content.decode()
    client.post(reverse("rebalance-plan", args=[plan.pk]), {"decision": "reject", "reason": "freeze week"})
    plan.refresh_from_db()
    assert plan.state == RebalancePlan.State.REJECTED
    body = client.get(reverse("rebalance-plan", args=[plan.pk])).content.decode()
    assert "by ada: freeze week" in body


def test_the_overview_shows_the_waiting_plan_and_the_target_split(client, cast, plan):
    client.force_login(cast["researcher"])
    body = client.get(reverse("rebalance")).content.decode()
    assert f"Plan #{plan.pk}" in body and "k8s-serving" in body and "No plan is waiting" not in body


def test_an_admin_approval_queues_the_apply_task(client, cast, plan, monkeypatch):
    from scheduling import tasks

    queued = []
    monkeypatch.setattr(tasks.apply_plan_step, "delay", queued.append)
    client.force_login(cast["admin"])
    client.post(reverse("rebalance-plan", args=[plan.pk]), {"decision": "approve", "reason": "9 AM floor"})
    plan.refresh_from_db()
    assert plan.state == RebalancePlan.State.APPROVED and queued == [plan.pk]
    assert plan.history.first().history_change_reason == "9 AM floor"


@pytest.mark.parametrize("role", ("researcher", "lead", "outsider"))
def test_only_admins_reach_the_pool_policy_page(client, cast, federation, role):
    client.force_login(cast[role])
    assert client.get(reverse("rebalance-policies")).status_code == 403


def _policy_form(orch, floor, **extra):
    return {"orchestrator": orch.pk, "name": extra.get("name", "inference floor"), "weekdays": list("12345"),
            "start_time": "08:00", "end_time": "20:00", "floor_gpus": floor, "ceiling_gpus": "", "lendable": "on",
            "precedence": 10, "enabled": "on", "reason": extra.get("reason", "inference SLA")}


def test_an_admin_adds_a_policy_with_a_reason_and_an_impossible_floor_is_refused_with_the_rules_named(
    client, cast, federation
):
    from scheduling.models import PoolPolicy

    client.force_login(cast["admin"])
    k8s, slurm = federation["orchs"]["k8s-serving"], federation["orchs"]["slurm-hpc"]
    response = client.post(reverse("rebalance-policies"), _policy_form(k8s, 32))
    assert response.status_code == 302
    saved = PoolPolicy.objects.get()
    assert saved.history.first().history_user == cast["admin"] and saved.weekdays == [1, 2, 3, 4, 5]
    refused = client.post(reverse("rebalance-policies"), _policy_form(slurm, 40, name="training"))
    body = refused.content.decode()
    assert refused.status_code == 200 and "Floor gpus: floors cannot all be met" in body
    assert "inference floor" in body and "training" in body and PoolPolicy.objects.count() == 1
