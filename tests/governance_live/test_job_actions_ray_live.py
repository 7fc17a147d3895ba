"""Act on my jobs (issue 33 item 14) on a real Ray cluster (scripts/ray): alice cancels her own Ray job through
the portal; the Jobs API stops the whole job (every task, actor and placement group), Ray's job list shows it
STOPPED, and the next collection round confirms the action and closes its workloads."""

from __future__ import annotations

import httpx
import pytest
from django.core.exceptions import PermissionDenied

from scheduling.models import JobAction, Orchestrator, Workload
from scheduling.services import job_actions
from scheduling.services.collection import scrape
from tests.collectors.conftest import REPO, wait_for

pytestmark = pytest.mark.live


def _ray_jobs(url: str) -> dict[str, str]:
    return {job["submission_id"]: job["status"] for job in httpx.get(f"{url}/api/jobs/", timeout=30).json()
            if job.get("submission_id")}


def test_alice_cancels_her_ray_job_and_it_is_stopped_on_the_cluster(
    ray_cluster, transactional_db, django_user_model, settings, tmp_path
):
    settings.CELERY_TASK_ALWAYS_EAGER = True
    import scheduling.tasks  # noqa: F401 - registers act_on_job, so the named signature runs here (eager)
    alice = django_user_model.objects.create_user("alice")
    bob = django_user_model.objects.create_user("bob")
    entrypoint = f"{ray_cluster.venv / 'bin' / 'python'} {REPO / 'scripts/ray/workload.py'} {tmp_path / 'ready'}"
    submitted = httpx.post(f"{ray_cluster.url}/api/jobs/", timeout=30,
                           json={"entrypoint": entrypoint, "metadata": {"team": "llm", "user": "alice"}})
    submitted.raise_for_status()
    submission = submitted.json()["submission_id"]
    try:
        ray = Orchestrator.objects.create(name="ray-live", kind="ray", endpoint=ray_cluster.url)
        mine = Workload.objects.filter(orchestrator=ray, submission_id=submission, state__in=Workload.ACTIVE_STATES)
        # Running or waiting: in a whole run the session's own Ray workload (tests/live_clusters.py) already holds
        # all 24 GPUs, so this job's work waits; a waiting job is cancelled the same way.
        wait_for(lambda: scrape(ray.pk).run.ok and mine.exists(), timeout=120, what="the Ray job's workloads")
        workload = mine.order_by("external_id").first()
        assert workload is not None and workload.user == "alice"

        with pytest.raises(PermissionDenied, match="owner"):
            job_actions.request_action(workload.pk, "cancel", by=bob, reason="not mine")  # bob is nobody here
        assert not JobAction.objects.exists() and _ray_jobs(ray_cluster.url)[submission] == "RUNNING"

        action = job_actions.request_action(workload.pk, "cancel", by=alice, reason="wrong learning rate")
        action.refresh_from_db()
        assert action.state == JobAction.State.SENT, action.message
        assert action.command == f"POST /api/jobs/{submission}/stop"
        wait_for(lambda: _ray_jobs(ray_cluster.url)[submission] == "STOPPED", timeout=60, what="Ray to stop the job")

        wait_for(lambda: scrape(ray.pk).run.ok and not mine.exists(), timeout=60, what="its workloads to close")
        action.refresh_from_db()
        assert action.state == JobAction.State.CONFIRMED and "no longer runs or queues it" in action.message
    finally:
        httpx.post(f"{ray_cluster.url}/api/jobs/{submission}/stop", timeout=30)
