"""ORM reads for the weekly capacity report: plain tuples and dataclasses, a fixed number of queries each.

The report is composed from these in ``scheduling.reports.capacity``, which imports no selector: it is handed
``WeekReads`` (below), the one object naming everything it reads. Nothing here decides or formats. Windows are
half-open ``[since, until)``.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import Count, OuterRef, Q, Subquery, Sum

from scheduling.engine.calendar import PolicyRule
from scheduling.models import (
    CapacityReport,
    CollectorRun,
    NodeMove,
    Orchestrator,
    PoolPolicy,
    Queue,
    QuotaGrant,
    QuotaRequest,
    RebalancePlan,
    Team,
    TeamTree,
    UsageRollup,
    Workload,
)
from scheduling.selectors import busy, fragmentation_trend, ledger, usage
from scheduling.selectors.db_time import SecondsBetween
from scheduling.selectors.pool_policies import rule_of
from scheduling.selectors.retention import pruned_before


@dataclass(frozen=True)
class SourceRuns:
    """One source's scrape outcomes in the window, and its last success before the window."""

    name: str
    kind: str
    last_ok_before: datetime | None
    runs: list[tuple[datetime, bool]]
    registered_at: datetime | None = None  # None: unknown (no record of it), taken as registered all along


def source_runs(since: datetime, until: datetime) -> list[SourceRuns]:
    """Every enabled source, with when it was registered: its first history record (``save_audited`` and
    every save write one) or its first scrape, whichever is earlier (rows imported with older scrapes). Rounds
    before the last prune of raw history are read from the hourly rollups (``_runs_from_rollups``)."""
    before = CollectorRun.objects.filter(orchestrator=OuterRef("pk"), ok=True, started_at__lt=since)
    first_record = Orchestrator.history.filter(id=OuterRef("pk")).order_by("history_date").values("history_date")
    first_run = CollectorRun.objects.filter(orchestrator=OuterRef("pk")).order_by("started_at").values("started_at")
    orchestrators = Orchestrator.objects.filter(enabled=True).annotate(
        last_ok_before=Subquery(before.order_by("-started_at").values("started_at")[:1]),
        first_record=Subquery(first_record[:1]),
        first_run=Subquery(first_run[:1]),
    )
    runs: dict[int, list[tuple[datetime, bool]]] = defaultdict(list)
    pruned = pruned_before()
    kept_from = since if pruned is None else max(since, min(pruned, until))
    if kept_from > since:
        _runs_from_rollups(runs, since, kept_from)
    for orch_id, started, ok in (
        CollectorRun.objects.filter(started_at__gte=kept_from, started_at__lt=until)
        .order_by("started_at")
        .values_list("orchestrator_id", "started_at", "ok")
    ):
        runs[orch_id].append((started, ok))
    return [
        SourceRuns(o.name, o.kind, o.last_ok_before, runs.get(o.pk, []), _earliest(o.first_record, o.first_run))
        for o in orchestrators.order_by("name")
    ]


def _runs_from_rollups(runs: dict[int, list[tuple[datetime, bool]]], since: datetime, until: datetime) -> None:
    """Successful rounds as the hourly pool rollups remember them, where the collector runs were pruned
    (services/retention.py): a round every ``GPUPORTAL_ROUND_SECONDS`` over the part of each hour its samples
    covered (``covered_s``), from the hour's start. So a gap in collection stays a gap (placed at the end of its
    hour); failed attempts left no sample and are not known."""
    step = timedelta(seconds=settings.GPUPORTAL_ROUND_SECONDS)
    hours = (
        UsageRollup.objects.filter(
            resolution=UsageRollup.Resolution.HOUR, team__isnull=True, period_start__gte=since, period_start__lt=until
        )
        .order_by("period_start")
        .values_list("orchestrator_id", "period_start", "covered_s")
    )
    for orch_id, start, covered in hours:
        rounds = int(min(covered, 3600.0) // step.total_seconds())
        runs[orch_id].extend((start + step * i, True) for i in range(rounds) if start + step * i < until)


def _earliest(*moments: datetime | None) -> datetime | None:
    return min((m for m in moments if m is not None), default=None)


def recorded_anything(since: datetime, until: datetime) -> bool:
    """Whether the portal recorded any data in the window: a successful scrape, a usage rollup or a job that
    ran. A week with none was not observed at all (no worker ran, or no source was registered yet)."""
    return (
        CollectorRun.objects.filter(ok=True, started_at__gte=since, started_at__lt=until).exists()
        or UsageRollup.objects.filter(period_start__gte=since, period_start__lt=until).exists()
        or Workload.objects.filter(started_at__lt=until)
        .filter(Q(finished_at__isnull=True) | Q(finished_at__gte=since))
        .exists()
    )


@dataclass(frozen=True)
class PoolSeconds:
    """GPU-seconds of one orchestrator's pool over the window, as its collector reported them."""

    name: str
    kind: str
    total: float
    allocated: float
    unavailable: float
    planned: float
    pending: float
    busy: float | None
    covered_s: float


def pool_seconds(since: datetime, until: datetime) -> list[PoolSeconds]:
    rows = (
        UsageRollup.objects.filter(
            resolution=UsageRollup.Resolution.HOUR, team__isnull=True, period_start__gte=since, period_start__lt=until
        )
        .values("orchestrator__name", "orchestrator__kind")
        .annotate(
            total=Sum("gpu_s_total"),
            allocated=Sum("gpu_s_allocated"),
            unavailable=Sum("gpu_s_unavailable"),
            planned=Sum("gpu_s_planned"),
            pending=Sum("gpu_s_pending"),
            busy=Sum("gpu_s_busy"),
            covered=Sum("covered_s"),
        )
        .order_by("orchestrator__name")
    )
    return [
        PoolSeconds(
            r["orchestrator__name"],
            r["orchestrator__kind"],
            r["total"] or 0.0,
            r["allocated"] or 0.0,
            r["unavailable"] or 0.0,
            r["planned"] or 0.0,
            r["pending"] or 0.0,
            r["busy"],
            r["covered"] or 0.0,
        )
        for r in rows
    ]


def pool_hours_owned(since: datetime, until: datetime) -> dict[str, dict[datetime, float]]:
    """Average GPUs each pool owned in each hour of the window (from its hourly rollups)."""
    owned: dict[str, dict[datetime, float]] = defaultdict(dict)
    for name, start, total, covered in UsageRollup.objects.filter(
        resolution=UsageRollup.Resolution.HOUR, team__isnull=True, period_start__gte=since, period_start__lt=until
    ).values_list("orchestrator__name", "period_start", "gpu_s_total", "covered_s"):
        if covered:
            owned[name][start] = total / covered
    return dict(owned)


@dataclass(frozen=True)
class Interval:
    """A workload's GPUs held from ``start`` to ``end`` (already clipped to the window)."""

    team_id: int | None
    user: str
    orchestrator: str
    gpus: int
    start: datetime
    end: datetime


def held_intervals(since: datetime, until: datetime) -> list[Interval]:
    """Every workload that held GPUs inside the window, its time clipped to the window (job accounting,
    as Slurm's sreport does it: exact start and end times rather than sampled rounds)."""
    rows = (
        Workload.objects.filter(started_at__isnull=False, started_at__lt=until)
        .filter(Q(finished_at__isnull=True) | Q(finished_at__gt=since))
        .values_list(
            "team_id", "user", "orchestrator__name", "gang_size", "gpus_per_member", "started_at", "finished_at"
        )
    )
    result = []
    for team_id, user, orch, gang, per_member, started, finished in rows:
        start, end = max(started, since), min(finished or until, until)
        if end > start and gang * per_member > 0:
            result.append(Interval(team_id, user or "(unknown)", orch, gang * per_member, start, end))
    return result


def started_waits(since: datetime, until: datetime) -> list[tuple[str, int, float]]:
    """(orchestrator, GPUs, wait seconds) of each workload that started in the window."""
    rows = (
        Workload.objects.filter(started_at__gte=since, started_at__lt=until)
        .annotate(wait=SecondsBetween("submitted_at", "started_at"))
        .values_list("orchestrator__name", "gang_size", "gpus_per_member", "wait")
    )
    # Rounded to the millisecond: SQLite's julianday arithmetic leaves noise in the last digits.
    return [(o, g * p, round(max(wait or 0.0, 0.0), 3)) for o, g, p, wait in rows]


def started_wait_stats(
    since: datetime, until: datetime
) -> tuple[list[usage.WaitStats], dict[str, list[usage.WaitStats]]]:
    """Queue-wait p50/p90/p99 per request size of the work that started in the window: over the fleet, and
    per orchestrator name."""
    fleet: dict[int, list[float]] = defaultdict(list)
    by_orchestrator: dict[str, dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    for orchestrator, gpus, wait in started_waits(since, until):
        bucket = usage.size_bucket(gpus)
        fleet[bucket].append(wait)
        by_orchestrator[orchestrator][bucket].append(wait)
    return usage.wait_stats(fleet), {name: usage.wait_stats(waits) for name, waits in by_orchestrator.items()}


def pending_reasons(since: datetime, until: datetime) -> list[tuple[str, str, int]]:
    """(orchestrator, reason, GPUs) of work submitted before the window ended that had not started by its
    end, where the orchestrator said why (a reason is cleared once the work starts)."""
    rows = (
        Workload.objects.filter(submitted_at__lt=until, state=Workload.State.PENDING)
        .exclude(pending_reason="")
        .values_list("orchestrator__name", "pending_reason", "gang_size", "gpus_per_member")
    )
    return [(o, reason, g * p) for o, reason, g, p in rows]


@dataclass(frozen=True)
class QueueVersion:
    team_id: int
    weight: float
    guaranteed: int
    burst_limit: int


def queue_change_moments(since: datetime, until: datetime) -> list[datetime]:
    """When any-model entitlements changed inside the window (each starts a new segment of policy)."""
    return sorted(
        set(
            Queue.history.filter(gpu_model="", history_date__gt=since, history_date__lt=until).values_list(
                "history_date", flat=True
            )
        )
    )


def queues_as_of(moment: datetime) -> dict[int, QueueVersion]:
    """The any-model entitlements in force at ``moment``, from the policy history (django-simple-history).

    A queue whose history starts after ``moment`` (the portal was installed, or the queue created, later)
    counts with its first recorded version: a report over a week before the history began would otherwise
    read every target as 0 %. ``policy_history_starts`` tells the reader when that applies."""
    found = {
        q.team_id: QueueVersion(q.team_id, float(q.weight), q.guaranteed, q.burst_limit)
        for q in Queue.history.as_of(moment).filter(gpu_model="")
    }
    later = (
        Queue.history.filter(gpu_model="", history_date__gt=moment, history_type="+")
        .exclude(team_id__in=list(found))
        .order_by("history_date")
    )
    for q in later:
        found.setdefault(q.team_id, QueueVersion(q.team_id, float(q.weight), q.guaranteed, q.burst_limit))
    return found


def policy_history_starts() -> datetime | None:
    return Queue.history.filter(gpu_model="").order_by("history_date").values_list("history_date", flat=True).first()


def pool_rules_as_of(moment: datetime):
    """The enabled pool policies in force at ``moment`` (historical instances, with their orchestrator)."""
    policies = list(PoolPolicy.history.as_of(moment).filter(enabled=True))
    names = dict(Orchestrator.objects.values_list("pk", "name"))
    return [(names.get(p.orchestrator_id, "?"), p) for p in policies]


def pool_rule_set_as_of(moment: datetime) -> list[PolicyRule]:
    """The engine's rules of the pool policies in force at ``moment``."""
    return [rule_of(policy, name) for name, policy in pool_rules_as_of(moment)]


@dataclass(frozen=True)
class MoveRow:
    plan_id: int
    node: str
    gpus: int
    source: str
    target: str
    at: datetime
    reason: str


def moves_done(since: datetime, until: datetime) -> list[MoveRow]:
    rows = (
        NodeMove.objects.filter(state=NodeMove.State.MOVED, updated_at__gte=since, updated_at__lt=until)
        .order_by("updated_at")
        .values_list("plan_id", "node__name", "node__gpu_total", "source__name", "target__name", "updated_at", "reason")
    )
    return [MoveRow(*row) for row in rows]


def plans_by_state(since: datetime, until: datetime) -> dict[str, int]:
    rows = RebalancePlan.objects.filter(created_at__gte=since, created_at__lt=until).values("state")
    return {r["state"]: r["n"] for r in rows.annotate(n=Count("id")).order_by("state")}


@dataclass(frozen=True)
class QuotaFacts:
    filed: list[tuple[str, int]]
    decided: list[tuple[str, str, int]]
    expiring: list[tuple[int, str, int, str, datetime]]


def quota_facts(since: datetime, until: datetime, expiring_until: datetime) -> QuotaFacts:
    filed = (
        QuotaRequest.objects.filter(created_at__gte=since, created_at__lt=until)
        .exclude(state=QuotaRequest.State.DRAFT)
        .values_list("team__slug", "gpus")
    )
    decided = QuotaRequest.objects.filter(decided_at__gte=since, decided_at__lt=until).values_list(
        "team__slug", "state", "gpus"
    )
    expiring = (
        QuotaGrant.objects.filter(
            state__in=(QuotaGrant.State.SCHEDULED, QuotaGrant.State.ACTIVE),
            ends_at__gte=until,
            ends_at__lt=expiring_until,
        )
        .order_by("ends_at")
        .values_list("request_id", "team__slug", "gpus", "gpu_model", "ends_at")
    )
    return QuotaFacts(list(filed), list(decided), list(expiring))


def previous_content(period_start: datetime) -> dict | None:
    """The stored content of the report of the week before, when it exists."""
    row = (
        CapacityReport.objects.filter(period_end=period_start, generated_at__isnull=False)
        .values_list("content", flat=True)
        .first()
    )
    return row or None


def stored_reports():
    """Stored reports, newest week first, without their (large) content."""
    return CapacityReport.objects.defer("content")


def generated_reports():
    """Reports whose content has been built (a claimed, still-building row has none)."""
    return CapacityReport.objects.filter(generated_at__isnull=False)


def stored_report(report_id: int) -> CapacityReport | None:
    return generated_reports().filter(pk=report_id).first()


def team_tree() -> TeamTree:
    return Team.objects.tree()


@dataclass(frozen=True)
class WeekReads:
    """Everything the capacity report's composition (``reports/capacity.py``) reads, handed to it as one object
    so that it imports no selector and no model. ``outlook`` is the forecast's guarantee exhaustion at a moment:
    a service (it caches its fits), so the caller in ``services/report_delivery.py`` hands it in."""

    outlook: Callable[[datetime], Sequence[object]]

    # 1. completeness, 2. capacity
    source_runs = staticmethod(source_runs)
    recorded_anything = staticmethod(recorded_anything)
    pool_seconds = staticmethod(pool_seconds)

    # 3. teams: the tree, the entitlements in force, job accounting, measured busy-ness
    team_tree = staticmethod(team_tree)
    queue_change_moments, queues_as_of = staticmethod(queue_change_moments), staticmethod(queues_as_of)
    policy_history_starts = staticmethod(policy_history_starts)
    held_intervals, efficiency_by_team = staticmethod(held_intervals), staticmethod(busy.efficiency_by_team)

    # 4. waits, 5. fragmentation, 6. rebalancing and floors
    started_wait_stats, pending_reasons = staticmethod(started_wait_stats), staticmethod(pending_reasons)
    fragmentation_trend = staticmethod(fragmentation_trend.fragmentation_trend)
    moves_done, plans_by_state = staticmethod(moves_done), staticmethod(plans_by_state)
    pool_hours_owned, pool_rule_set_as_of = staticmethod(pool_hours_owned), staticmethod(pool_rule_set_as_of)

    # 7. quota, 9. ledger, 8. the week before (a stored report's headline)
    quota_facts = staticmethod(quota_facts)
    ledger_findings_between = staticmethod(ledger.ledger_findings_between)
    previous_content = staticmethod(previous_content)
