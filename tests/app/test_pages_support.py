"""Shared page-test data (imported by the test_pages_* modules; holds no tests itself)."""

from datetime import timedelta

from django.utils import timezone

from scheduling.models import CollectorRun, UsageRollup, UsageSample, Workload
from scheduling.services.metrics import refresh_rollups


def build_site(orchestrator, fleet, teams, busy: bool = True) -> dict:
    """Running and pending work for nlp and production, 3 days of samples (rolled up), one scrape."""
    now = timezone.now()
    fleet[0].gpu_allocated = 8
    fleet[1].gpu_allocated = 3
    for node in fleet[:2]:
        node.save(update_fields=["gpu_allocated"])
    running = Workload.objects.create(
        orchestrator=orchestrator,
        external_id="run-1",
        team=teams["nlp"],
        user="rita",
        gang_size=1,
        gpus_per_member=8,
        state=Workload.State.RUNNING,
        submitted_at=now - timedelta(hours=3),
        started_at=now - timedelta(hours=2),
        nodes=[{"node": fleet[0].name, "gpus": list(range(8))}],
    )
    Workload.objects.create(
        orchestrator=orchestrator,
        external_id="run-2",
        team=teams["production"],
        user="otto",
        gang_size=1,
        gpus_per_member=3,
        state=Workload.State.RUNNING,
        submitted_at=now - timedelta(hours=1),
        started_at=now - timedelta(minutes=50),
        nodes=[{"node": fleet[1].name, "gpus": [0, 1, 2]}],
    )
    pending = Workload.objects.create(
        orchestrator=orchestrator,
        external_id="wait-1",
        team=teams["nlp"],
        user="rita",
        gang_size=8,
        gpus_per_member=8,
        state=Workload.State.PENDING,
        submitted_at=now - timedelta(minutes=20),
        pending_reason="no 64 free GPUs inside one leaf switch (largest free block 32)",
    )
    samples = []
    for step in range(0, 72 * 4):
        taken = now - timedelta(minutes=15 * step)
        samples.append(
            UsageSample(
                taken_at=taken,
                orchestrator=orchestrator,
                team=None,
                gpus_total=64,
                gpus_allocated=11,
                gpus_busy=9 if busy else None,
                gpus_pending=64,
                interval_s=900,
            )
        )
        samples.append(
            UsageSample(
                taken_at=taken,
                orchestrator=orchestrator,
                team=teams["nlp"],
                gpus_allocated=8,
                gpus_busy=7 if busy else None,
                gpus_pending=64,
                interval_s=900,
            )
        )
    UsageSample.objects.bulk_create(samples)
    refresh_rollups(now - timedelta(days=3), now)
    CollectorRun.objects.create(orchestrator=orchestrator, started_at=now, duration_ms=321, ok=True, nodes=8)
    orchestrator.last_success_at = now
    orchestrator.save(update_fields=["last_success_at"])
    assert UsageRollup.objects.exists()
    return {"running": running, "pending": pending}
