"""Recorded history for the planning tests: two orchestrators on the cast's fleet, two weeks of work."""

import random
from datetime import time, timedelta

import pytest
from django.utils import timezone

from scheduling.models import Node, Orchestrator, PoolPolicy, Workload


@pytest.fixture
def k8s(db):
    return Orchestrator.objects.create(name="k8s", kind="kubernetes", endpoint="https://k8s.example:6443")


@pytest.fixture
def recorded(fleet, k8s, queues, teams, orchestrator):
    """~300 finished jobs over the last 13 days, plus running, pending and cancelled ones; k8s owns 2 nodes
    and has a weekday business-hours floor of 16 GPUs."""
    Node.objects.filter(name__in=["dgx06", "dgx07"]).update(orchestrator=k8s)
    PoolPolicy.objects.create(
        orchestrator=k8s,
        name="business hours",
        weekdays=[1, 2, 3, 4, 5],
        start_time=time(8),
        end_time=time(20),
        floor_gpus=16,
    )
    rng = random.Random(11)
    now = timezone.now().replace(microsecond=0)
    start = now - timedelta(days=13)
    rows = []
    for i in range(300):
        submitted = start + timedelta(minutes=rng.randrange(0, 13 * 24 * 60 - 600))
        wait = timedelta(minutes=rng.choice((0, 0, 1, 5, 30)))
        run = timedelta(minutes=rng.randrange(10, 480))
        gang, per = rng.choice(((1, 1), (1, 2), (1, 4), (1, 8), (2, 8)))
        team = rng.choice(("nlp", "production", "research"))
        rows.append(
            Workload(
                orchestrator=orchestrator if gang > 1 or per == 8 else k8s,
                external_id=f"job-{i}",
                team=teams[team],
                kind="training" if gang > 1 else "inference",
                gang_size=gang,
                gpus_per_member=per,
                state=Workload.State.COMPLETED,
                priority=rng.choice((0, 10)),
                submitted_at=submitted,
                started_at=submitted + wait,
                finished_at=submitted + wait + run,
            )
        )
    rows += [
        Workload(
            orchestrator=orchestrator,
            external_id="running",
            team=teams["nlp"],
            gang_size=1,
            gpus_per_member=4,
            state=Workload.State.RUNNING,
            submitted_at=now - timedelta(hours=3),
            started_at=now - timedelta(hours=2),
        ),
        Workload(
            orchestrator=k8s,
            external_id="pending",
            team=teams["production"],
            gang_size=1,
            gpus_per_member=2,
            state=Workload.State.PENDING,
            submitted_at=now - timedelta(hours=1),
            duration_estimate_s=3600,
        ),
        Workload(
            orchestrator=k8s,
            external_id="pending-unknown",
            team=teams["production"],
            gang_size=1,
            state=Workload.State.PENDING,
            submitted_at=now - timedelta(hours=1),
        ),
        Workload(
            orchestrator=k8s,
            external_id="cancelled",
            team=None,
            gang_size=1,
            state=Workload.State.CANCELLED,
            submitted_at=now - timedelta(hours=5),
        ),
        Workload(
            orchestrator=k8s,
            external_id="too-old",
            team=teams["nlp"],
            gang_size=1,
            state=Workload.State.COMPLETED,
            submitted_at=now - timedelta(days=30),
            started_at=now - timedelta(days=30),
            finished_at=now - timedelta(days=29),
        ),
    ]
    Workload.objects.bulk_create(rows)
    return now
