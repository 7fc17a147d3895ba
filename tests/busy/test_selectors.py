"""Reads for pages and /metrics: efficiency per team, user and pool; the idle-allocated job list."""

from datetime import timedelta

import pytest
from django.utils import timezone

from scheduling.models import Orchestrator, UsageSample, Workload, WorkloadUtilisation
from scheduling.selectors import busy
from scheduling.services.metrics import refresh_rollups

pytestmark = pytest.mark.django_db


@pytest.fixture
def measured(teams):
    slurm = Orchestrator.objects.create(name="slurm-a", kind="slurm", endpoint="https://slurm.example")
    now = timezone.now().replace(minute=30, second=0, microsecond=0) - timedelta(hours=1)
    for minute in range(0, 20, 10):
        at = now + timedelta(minutes=minute)
        UsageSample.objects.create(
            taken_at=at, orchestrator=slurm, gpus_total=16, gpus_allocated=8, gpus_busy=5, interval_s=600
        )
        UsageSample.objects.create(
            taken_at=at, orchestrator=slurm, team=teams["nlp"], gpus_allocated=8, gpus_busy=4, interval_s=600
        )
    UsageSample.objects.create(taken_at=now + timedelta(minutes=20), orchestrator=slurm, gpus_allocated=8)
    refresh_rollups(now, now + timedelta(minutes=20))
    job = Workload.objects.create(
        orchestrator=slurm,
        external_id="7",
        team=teams["nlp"],
        user="rita",
        gpus_per_member=8,
        state=Workload.State.RUNNING,
        submitted_at=now,
        started_at=now,
    )
    WorkloadUtilisation.objects.create(
        workload=job,
        allocated_gpu_s=8 * 1200,
        busy_gpu_s=4 * 1200,
        idle_allocated_gpu_s=3600,
        samples=80,
        last_sample_at=now + timedelta(minutes=20),
    )
    return now


def window(now):
    return now - timedelta(hours=1), now + timedelta(hours=2)


def test_it_reads_efficiency_per_team_with_its_idle_allocated_hours(measured):
    (nlp,) = busy.efficiency_by_team(*window(measured))
    assert (nlp.key, nlp.allocated_h, nlp.busy_h, nlp.idle_allocated_h) == (
        "nlp",
        pytest.approx(8 / 3),
        pytest.approx(4 / 3),
        1.0,
    )
    assert nlp.efficiency == pytest.approx(0.5)


def test_it_reports_pool_busy_time_no_team_explains_as_unattributed(measured):
    (pool,) = busy.efficiency_by_orchestrator(*window(measured))
    assert pool.busy_h == pytest.approx(5 / 3) and pool.unattributed_busy_h == pytest.approx(1 / 3)


def test_busy_now_reads_the_latest_measured_sample_not_the_newest_one(measured):
    assert busy.busy_now() == 5


def test_metrics_expose_busy_gpus_efficiency_and_idle_allocated_hours(measured, client, settings):
    settings.METRICS_TOKEN = "t"  # /metrics needs it or an admin (tests/security)
    body = client.get("/metrics", HTTP_AUTHORIZATION="Bearer t").content.decode()
    assert 'gpuportal_pool_busy_gpus{orchestrator="slurm-a"} 5.0' in body
    assert 'gpuportal_efficiency_ratio{name="nlp",scope="team"} 0.5' in body
    assert 'gpuportal_idle_allocated_gpu_hours{team="nlp"} 1.0' in body
