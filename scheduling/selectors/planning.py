"""ORM -> plain data for capacity planning: hourly demand history (forecast) and recorded work as trace jobs
(what-if, ``export_history``). Demand = allocated + pending GPUs, the GPUs a team or pool *wanted*."""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.db.models import F, Sum

from scheduling.engine.types import OrchestratorKind
from scheduling.models import Orchestrator, Team, UsageRollup, Workload
from scheduling.selectors.engine_inputs import recorded_request
from scheduling.traces.records import TraceJob

HOUR = timedelta(hours=1)


@dataclass(frozen=True)
class DemandHistory:
    """Hourly demand on one grid; None where no round recorded anything that hour."""

    hours: list[datetime]
    by_team: dict[str, list[float | None]]
    by_orchestrator: dict[str, list[float | None]]
    team_names: dict[str, str]


def floor_hour(moment: datetime) -> datetime:
    return moment.replace(minute=0, second=0, microsecond=0)


def hourly_demand(since: datetime, until: datetime, team_ids: set[int] | None = None) -> DemandHistory:
    """Per team (its whole subtree, like the guarantee it is compared with) and per orchestrator pool.

    ``team_ids`` limits the teams computed (with their subtrees); the database sums over orchestrators, so
    the rows read are hours x teams, not hours x teams x orchestrators.
    """
    start, end = floor_hour(since), floor_hour(until)
    hours = [start + HOUR * i for i in range(int((end - start) / HOUR))]
    index = {moment: i for i, moment in enumerate(hours)}
    rollups = UsageRollup.objects.filter(
        resolution=UsageRollup.Resolution.HOUR, period_start__gte=start, period_start__lt=end, covered_s__gt=0
    )
    gpus = Sum((F("gpu_s_allocated") + F("gpu_s_pending")) / F("covered_s"))
    observed = [False] * len(hours)
    pools: dict[str, list[float | None]] = {}
    pool_rows = rollups.filter(team__isnull=True).values("period_start", "orchestrator__name").annotate(gpus=gpus)
    for row in pool_rows.values_list("period_start", "orchestrator__name", "gpus"):
        at, orchestrator, value = row
        i = index.get(at)
        if i is not None:
            observed[i] = True
            pools.setdefault(orchestrator, [None] * len(hours))[i] = value or 0.0
    tree = Team.objects.tree()
    teams = tree.teams
    wanted = set(teams) if team_ids is None else tree.subtrees(team_ids)
    own: dict[int, list[float]] = defaultdict(lambda: [0.0] * len(hours))
    team_rows = rollups.filter(team_id__in=wanted).values("period_start", "team_id").annotate(gpus=gpus)
    for at, team_id, value in team_rows.values_list("period_start", "team_id", "gpus"):
        i = index.get(at)
        if i is not None:
            own[team_id][i] += value or 0.0
    by_team: dict[str, list[float | None]] = {}
    for team_id in sorted(team_ids if team_ids is not None else teams):
        subtree = [own[t] for t in tree.subtree(team_id) if t in own]
        by_team[teams[team_id].slug] = [
            sum(series[i] for series in subtree) if observed[i] else None for i in range(len(hours))
        ]
    return DemandHistory(hours, by_team, pools, {t.slug: t.name for t in teams.values()})


# --- recorded work as trace jobs (the simulator's generic format) ----------------------------------------

SCHEDULER_KINDS = {kind.value for kind in OrchestratorKind}
NO_TEAM = "(no team)"


@dataclass(frozen=True)
class HistoryExport:
    """Trace jobs (times in seconds from ``epoch``) and what was left out, counted by reason."""

    epoch: datetime
    until: datetime
    jobs: tuple[TraceJob, ...]
    skipped: dict[str, int] = field(default_factory=dict)


def history_trace_jobs(until: datetime, weeks: int) -> HistoryExport:
    """Workloads submitted in the ``weeks`` before ``until`` as TraceJobs, in submission order.

    Duration = finished - started for finished work; running work counts as running until ``until`` (a
    lower bound, said in the docs); pending work uses its duration estimate. Work that never started and
    has no estimate, or was cancelled before starting, carries no demand the simulator could replay.
    """
    since = until - timedelta(weeks=weeks)
    rows = (
        Workload.objects.filter(submitted_at__gte=since, submitted_at__lt=until)
        .exclude(orchestrator__kind=Orchestrator.Kind.PROMETHEUS)
        .select_related("orchestrator", "team")
        .order_by("submitted_at", "pk")
    )
    jobs, skipped = [], Counter()
    for workload in rows:
        duration, reason = _duration(workload, until)
        if duration is None:
            skipped[reason] += 1
            continue
        jobs.append(_trace_job(workload, since, duration))
    return HistoryExport(since, until, tuple(jobs), dict(skipped))


def _duration(workload: Workload, until: datetime) -> tuple[float | None, str]:
    if workload.started_at is not None:
        end = min(workload.finished_at or until, until)
        return max((end - workload.started_at).total_seconds(), 0.0), ""
    if workload.state == Workload.State.PENDING and workload.duration_estimate_s:
        return float(workload.duration_estimate_s), ""
    if workload.state == Workload.State.PENDING:
        return None, "pending without a duration estimate"
    return None, f"{workload.state} before it started"


def _trace_job(workload: Workload, epoch: datetime, duration: float) -> TraceJob:
    submit = (workload.submitted_at - epoch).total_seconds()
    kind = workload.orchestrator.kind
    request = recorded_request(
        workload, submit_s=submit, duration_s=duration, team=workload.team.slug if workload.team else NO_TEAM,
        orchestrator=kind if kind in SCHEDULER_KINDS else "",
    )
    return TraceJob(request=request, submit_s=submit, duration_s=duration)
