"""A small, hand-computable week of history (TIME_ZONE UTC): Mon 2026-11-16 00:00 to Mon 2026-11-23 00:00.

Pool slurm-a: 64 GPUs, 56 on Mon 08:00-10:00; 20 allocated all week; 8 down for the first 24 h; 8 planned
for 6 h (hours 24-30); 16 pending for 10 h; nlp measured by DCGM on Tuesday, 4 of its 10 GPUs busy.
Policy: research 40 % / 16 GPUs until Thu 00:00, then 50 % / 32; production 60 % then 50 %, 24 GPUs.
Floor 64 GPUs on weekdays 08-20 for slurm-a. Workloads with start and end times to the minute. Every
expected figure in the tests is worked out from these lines.
"""

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest

from scheduling.models import (
    CollectorRun,
    NodeMove,
    Orchestrator,
    PoolPolicy,
    Queue,
    QuotaGrant,
    QuotaRequest,
    RebalancePlan,
    UsageSample,
    Workload,
)
from scheduling.reports.capacity import Window
from scheduling.services.metrics import refresh_rollups

MONDAY = datetime(2026, 11, 16, tzinfo=UTC)
WEEK = Window(MONDAY, MONDAY + timedelta(days=7), "UTC")
BEFORE = datetime(2026, 11, 1, tzinfo=UTC)
THURSDAY = MONDAY + timedelta(days=3)


def at(day: int, hour: int, minute: int = 0) -> datetime:
    return MONDAY + timedelta(days=day, hours=hour, minutes=minute)


def _backdate(model, moment, **filters) -> None:
    model.history.filter(**filters).update(history_date=moment)


@pytest.fixture
def week(orchestrator, fleet, teams, cast):
    k8s = Orchestrator.objects.create(name="k8s-a", kind="kubernetes", endpoint="https://k8s.example:6443")
    _backdate(Orchestrator, BEFORE, name="k8s-a")  # registered before the week, never scraped in it
    research = Queue.objects.create(team=teams["research"], weight=Decimal(40), guaranteed=16, burst_limit=48)
    production = Queue.objects.create(team=teams["production"], weight=Decimal(60), guaranteed=24, burst_limit=64)
    Queue.objects.create(team=teams["nlp"], weight=Decimal(100), guaranteed=8, burst_limit=32)
    _backdate(Queue, BEFORE)
    research.weight, research.guaranteed = Decimal(50), 32
    research.save()
    production.weight = Decimal(50)
    production.save()
    _backdate(Queue, THURSDAY, history_date__gt=BEFORE)
    PoolPolicy.objects.create(
        orchestrator=orchestrator,
        name="business hours",
        weekdays=[1, 2, 3, 4, 5],
        start_time="08:00",
        end_time="20:00",
        floor_gpus=64,
    )
    _backdate(PoolPolicy, BEFORE)
    _samples(orchestrator, teams["nlp"])
    _runs(orchestrator)
    _workloads(orchestrator, teams)
    _moves_and_quota(orchestrator, k8s, fleet, teams, cast)
    return {"orchestrator": orchestrator, "k8s": k8s}


def _samples(orchestrator, nlp) -> None:
    rows = []
    for h in range(168):
        rows.append(
            UsageSample(
                taken_at=MONDAY + timedelta(hours=h, minutes=30),
                interval_s=3600,
                orchestrator=orchestrator,
                gpus_total=56 if h in (8, 9) else 64,
                gpus_allocated=20,
                gpus_unavailable=8 if h < 24 else 0,
                gpus_planned=8 if 24 <= h < 30 else 0,
                gpus_pending=16 if 100 <= h < 110 else 0,
            )
        )
    for h in range(24):  # DCGM measured nlp on Tuesday: 10 GPUs allocated, 4 of them busy
        rows.append(
            UsageSample(
                taken_at=MONDAY + timedelta(days=1, hours=h, minutes=30),
                interval_s=3600,
                orchestrator=orchestrator,
                team=nlp,
                gpus_allocated=10,
                gpus_busy=4,
            )
        )
    UsageSample.objects.bulk_create(rows)
    refresh_rollups(MONDAY, MONDAY + timedelta(days=7))


def _runs(orchestrator) -> None:
    """A scrape every 5 minutes; Tue 10:00 fails and nothing succeeds until 11:00 (1 h stale)."""
    rows = [CollectorRun(orchestrator=orchestrator, started_at=MONDAY - timedelta(minutes=5), ok=True)]
    for i in range(7 * 24 * 12):
        moment = MONDAY + timedelta(minutes=5 * i)
        if at(1, 10) < moment < at(1, 11):
            continue
        rows.append(CollectorRun(orchestrator=orchestrator, started_at=moment, ok=moment != at(1, 10)))
    CollectorRun.objects.bulk_create(rows)


def _node(name: str, gpus: int) -> dict:
    return {"node": name, "gpus": list(range(gpus))}


def _workloads(orchestrator, teams) -> None:
    make = lambda ext, team, user, gang, per, sub, start, end, **kw: Workload.objects.create(  # noqa: E731
        orchestrator=orchestrator,
        external_id=ext,
        team=teams[team],
        user=user,
        gang_size=gang,
        gpus_per_member=per,
        submitted_at=sub,
        started_at=start,
        finished_at=end,
        state=kw.pop("state", Workload.State.COMPLETED if end else Workload.State.RUNNING),
        **kw,
    )
    make("w1", "nlp", "rita", 2, 8, at(0, 9), at(0, 10), at(0, 16, 31), nodes=[_node("dgx00", 8), _node("dgx01", 8)])
    make("w2", "research", "leo", 1, 8, at(-1, 19), at(-1, 20), at(1, 2, 15))
    make("w3", "production", "otto", 1, 4, at(4, 11), at(4, 12), None, nodes=[_node("dgx03", 4)])
    make("w4", "production", "otto", 1, 1, at(-3, 0), at(-3, 1), at(-2, 0))
    make("w5", "nlp", "rita", 1, 4, at(2, 9), at(2, 9, 45), at(2, 12), nodes=[_node("dgx02", 4)])
    reason = "no {} free GPUs inside one leaf switch (largest free block 4)"
    make("w6", "nlp", "rita", 1, 8, at(5, 1), None, None, state=Workload.State.PENDING, pending_reason=reason.format(8))
    make(
        "w7",
        "production",
        "otto",
        2,
        8,
        at(6, 1),
        None,
        None,
        state=Workload.State.PENDING,
        pending_reason=reason.format(16),
    )


def _moves_and_quota(orchestrator, k8s, fleet, teams, cast) -> None:
    plan = RebalancePlan.objects.create(state=RebalancePlan.State.APPLIED, reason="ray is deeper")
    RebalancePlan.objects.filter(pk=plan.pk).update(created_at=at(2, 3))
    move = NodeMove.objects.create(
        plan=plan, node=fleet[7], source=orchestrator, target=k8s, state=NodeMove.State.MOVED
    )
    NodeMove.objects.filter(pk=move.pk).update(updated_at=at(2, 4))
    filed = lambda gpus, state, decided: QuotaRequest.objects.create(  # noqa: E731
        requester=cast["researcher"],
        team=teams["nlp"],
        gpus=gpus,
        starts_at=at(8, 0),
        ends_at=at(9, 12),
        justification="deadline",
        state=state,
        decided_at=decided,
    )
    approved = filed(8, QuotaRequest.State.APPROVED, at(3, 9))
    filed(16, QuotaRequest.State.DENIED, at(3, 10))
    filed(4, QuotaRequest.State.SUBMITTED, None)
    QuotaRequest.objects.update(created_at=at(1, 9))
    QuotaGrant.objects.create(request=approved, team=teams["nlp"], gpus=8, starts_at=at(8, 0), ends_at=at(9, 12))
