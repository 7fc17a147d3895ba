"""Why it waits across the fleet (issue 31 item 5): under the guarantee while others borrow GPUs here (with
the time a decided reclaim plan frees them), free on another orchestrator now, or fragmented where another
shape fits now; on the workload page and on "my workloads"."""

from datetime import UTC, datetime, timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from scheduling.models import Node, Orchestrator, ReclaimPlan, Workload

pytestmark = pytest.mark.django_db


def _job(orchestrator, team, user, external_id, *, state="pending", gang=1, per=8, nodes=()):
    now = timezone.now()
    return Workload.objects.create(
        orchestrator=orchestrator, team=team, user=user, external_id=external_id, gang_size=gang,
        gpus_per_member=per, state=state, submitted_at=now - timedelta(minutes=30),
        started_at=now - timedelta(minutes=20) if state == "running" else None, duration_estimate_s=3_600,
        nodes=list(nodes),
    )  # fmt: skip


@pytest.fixture
def production_fills_the_pool(orchestrator, fleet, teams, queues, cast):
    """production runs 64 GPUs (guarantee 24): 40 borrowed; rita's nlp job (guarantee 8, none held) waits."""
    Node.objects.filter(orchestrator=orchestrator).update(gpu_allocated=8)
    names = [f"dgx{i:02d}" for i in range(8)]
    _job(orchestrator, teams["production"], "otto", "p1", state="running", gang=8, nodes=names)
    return _job(orchestrator, teams["nlp"], "rita", "r1")


def _detail(client, user, workload) -> str:
    client.force_login(user)
    response = client.get(reverse("workload-detail", args=[workload.pk]))
    assert response.status_code == 200
    return response.content.decode()


def test_a_job_under_its_guarantee_names_the_borrower_and_that_no_reclaim_is_scheduled(
    client, cast, production_fills_the_pool
):
    body = _detail(client, cast["researcher"], production_fills_the_pool)
    advice = body.split('data-advice="guarantee"', 1)[1].split("</li>", 1)[0]
    assert "your team holds 0 of its 8 guaranteed GPUs while 40 here are borrowed by production (40)" in advice
    assert "no reclaim is scheduled yet" in advice


def test_an_approved_reclaim_plan_for_the_job_shows_when_its_gpus_come_back(
    client, cast, production_fills_the_pool, settings
):
    """The time is the round after the admin's approval; a plan for another job, or one still waiting for an
    admin, schedules nothing for this one."""
    job = production_fills_the_pool
    decided = datetime(2026, 12, 6, 14, 4, 30, tzinfo=UTC)

    def plan(state, request_id, decided_at=None):
        return ReclaimPlan.objects.create(
            orchestrator=job.orchestrator, created_at=timezone.now(), mode="review", state=state,
            decided_at=decided_at, reclaims=[{"owner": "nlp", "request_id": request_id, "victims": []}],
        )  # fmt: skip

    plan(ReclaimPlan.State.PENDING, job.external_id)
    plan(ReclaimPlan.State.APPROVED, "someone-else", decided)
    assert "no reclaim is scheduled yet" in _detail(client, cast["researcher"], job)
    plan(ReclaimPlan.State.APPROVED, job.external_id, decided)
    settings.GPUPORTAL_ROUND_SECONDS = 30
    assert "reclaim expected by 14:05 UTC" in _detail(client, cast["researcher"], job)


def test_a_job_that_another_orchestrator_could_start_now_names_it(client, cast, production_fills_the_pool):
    k8s = Orchestrator.objects.create(name="k8s-b", kind="kubernetes", endpoint="https://k8s.example:6443")
    Node.objects.create(orchestrator=k8s, name="gpu-b0", gpu_model="H100", gpu_total=8)
    client.force_login(cast["researcher"])
    body = client.get(reverse("my-workloads")).content.decode()
    advice = body.split('data-advice="elsewhere"', 1)[1].split("</span>", 1)[0]
    assert "k8s-b could start it now (8 GPUs free there in this shape): submit it there" in advice


def test_a_fragmented_wait_names_the_shapes_that_fit_now(client, cast, orchestrator, fleet, teams, queues):
    Node.objects.filter(orchestrator=orchestrator).update(gpu_allocated=6)  # 2 free on each of 8 nodes
    waiting = _job(orchestrator, teams["nlp"], "rita", "r2")
    body = _detail(client, cast["researcher"], waiting)
    assert 'data-code="fragmented"' in body
    advice = body.split('data-advice="reshape"', 1)[1].split("</li>", 1)[0]
    assert "the same 8 GPUs as 4 × 2 GPUs or 8 × 1 GPUs would fit now" in advice


def test_a_job_that_fits_now_gets_no_guarantee_advice(client, cast, orchestrator, fleet, teams, queues):
    waiting = _job(orchestrator, teams["nlp"], "rita", "r3")
    assert 'data-advice="guarantee"' not in _detail(client, cast["researcher"], waiting)
