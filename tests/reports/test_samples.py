"""A scrape records the capacity nobody could use: down or drained GPUs, and idle GPUs held for a gang."""

from datetime import UTC, datetime

import pytest

from scheduling.collectors.snapshot import ObservedNode, Snapshot
from scheduling.engine.types import OrchestratorKind
from scheduling.models import UsageRollup, UsageSample
from scheduling.services.ingest import ingest_snapshot

pytestmark = pytest.mark.django_db
T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def _node(name, allocated=0, **extra):
    return ObservedNode(name=name, orchestrator="slurm-a", gpu_total=8, gpu_allocated=allocated, **extra)


def test_down_drained_and_planned_gpus_are_counted_in_the_pool_sample_and_its_rollup(orchestrator):
    nodes = [
        _node("n1", allocated=8),
        _node("n2", state="DOWN"),
        _node("n3", allocated=2, state="MIXED", state_flags=("DRAIN",)),  # draining: 6 free but not usable
        _node("n4", state="IDLE", state_flags=("PLANNED",)),  # Slurm backfill holds it for a pending job
        _node("n5", state="IDLE"),
    ]
    ingest_snapshot(orchestrator, Snapshot("slurm-a", OrchestratorKind.SLURM, T0, tuple(nodes), ()))
    sample = UsageSample.objects.get(team__isnull=True)
    assert (sample.gpus_total, sample.gpus_allocated) == (40, 10)
    assert (sample.gpus_unavailable, sample.gpus_planned) == (8 + 6, 8)
    hour = UsageRollup.objects.get(resolution=UsageRollup.Resolution.HOUR, team__isnull=True)
    assert hour.gpu_s_unavailable == pytest.approx(14 * sample.interval_s)
    assert hour.gpu_s_planned == pytest.approx(8 * sample.interval_s)
