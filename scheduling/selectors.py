"""ORM -> plain data and engine types: what pages, reports and the engine read."""

import itertools
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db.models import Count, Exists, F, FloatField, Func, Max, OuterRef, Q, Subquery, Sum

from scheduling.engine.fairshare import entitlements
from scheduling.engine.fragmentation import fragmentation_report, largest_placeable
from scheduling.engine.types import MILLI_PER_GPU, Entitlement, TeamSpec
from scheduling.engine.types import Node as EngineNode
from scheduling.models import (
    CollectorRun,
    Membership,
    Node,
    NodeMove,
    Orchestrator,
    Queue,
    RebalancePlan,
    Team,
    UsageRollup,
    UsageSample,
    Workload,
)

GANG_SHAPES = (1, 2, 4, 8, 16, 32, 64)


@dataclass(frozen=True)
class PoolNow:
    name: str
    kind: str
    nodes: int
    gpus_total: int
    gpus_allocated: int
    gpus_pending: int
    workloads_pending: int
    stale: bool
    last_success_at: datetime | None
    last_error: str


@dataclass(frozen=True)
class TeamNow:
    slug: str
    name: str
    depth: int
    weight: float
    guaranteed: int
    burst_limit: int
    allocated: int
    pending: int


def pools_now() -> list[PoolNow]:
    nodes = Node.objects.values("orchestrator_id").annotate(
        count=Count("id"), total=Sum("gpu_total"), allocated=Sum("gpu_allocated")
    )
    node_totals = {row["orchestrator_id"]: row for row in nodes}
    pending = (
        Workload.objects.filter(state=Workload.State.PENDING)
        .values("orchestrator_id")
        .annotate(gpus=Sum(F("gang_size") * F("gpus_per_member")), count=Count("id"))
    )
    pending_totals = {row["orchestrator_id"]: row for row in pending}
    return [
        PoolNow(
            name=o.name,
            kind=o.get_kind_display(),
            nodes=node_totals.get(o.pk, {}).get("count", 0),
            gpus_total=node_totals.get(o.pk, {}).get("total") or 0,
            gpus_allocated=node_totals.get(o.pk, {}).get("allocated") or 0,
            gpus_pending=pending_totals.get(o.pk, {}).get("gpus") or 0,
            workloads_pending=pending_totals.get(o.pk, {}).get("count") or 0,
            stale=o.is_stale,
            last_success_at=o.last_success_at,
            last_error=o.last_error,
        )
        for o in Orchestrator.objects.filter(enabled=True, kind__in=Orchestrator.SCHEDULER_KINDS)
    ]


def teams_now(visible: list[Team] | None = None) -> list[TeamNow]:
    """Each team's entitlement (any-model queue) and what it and its sub-teams hold and wait for now."""
    teams = list(Team.objects.all())
    children: dict[int | None, list[Team]] = defaultdict(list)
    for team in teams:
        children[team.parent_id].append(team)
    queues = {q.team_id: q for q in Queue.objects.filter(gpu_model="")}
    own = (
        Workload.objects.filter(state__in=Workload.ACTIVE_STATES, team__isnull=False)
        .values("team_id")
        .annotate(
            allocated=Sum(F("gang_size") * F("gpus_per_member"), filter=Q(state=Workload.State.RUNNING)),
            pending=Sum(F("gang_size") * F("gpus_per_member"), filter=Q(state=Workload.State.PENDING)),
        )
    )
    usage = {row["team_id"]: (row["allocated"] or 0, row["pending"] or 0) for row in own}
    allowed = None if visible is None else {t.pk for t in visible}
    rows: list[TeamNow] = []

    def walk(parent_id: int | None, depth: int) -> tuple[int, int]:
        total_alloc = total_pend = 0
        for team in sorted(children[parent_id], key=lambda t: t.slug):
            alloc, pend = usage.get(team.pk, (0, 0))
            index = len(rows)
            sub_alloc, sub_pend = walk(team.pk, depth + 1)
            alloc, pend = alloc + sub_alloc, pend + sub_pend
            if allowed is None or team.pk in allowed:
                q = queues.get(team.pk)
                rows.insert(
                    index,
                    TeamNow(
                        team.slug,
                        team.name,
                        depth,
                        float(q.weight) if q else 0.0,
                        q.guaranteed if q else 0,
                        q.burst_limit if q else 0,
                        alloc,
                        pend,
                    ),
                )
            total_alloc, total_pend = total_alloc + alloc, total_pend + pend
        return total_alloc, total_pend

    walk(None, 0)
    return rows


def engine_nodes() -> tuple[EngineNode, ...]:
    """The fleet as the engine sees it; a node's allocated GPUs are its lowest indices."""
    return tuple(
        EngineNode(
            name=n.name,
            gpu_total=n.gpu_total,
            gpu_model=n.gpu_model,
            gpu_free_milli=(0,) * n.gpu_allocated + (MILLI_PER_GPU,) * (n.gpu_total - n.gpu_allocated),
            nvlink_domain=n.nvlink_domain,
            leaf_switch=n.leaf_switch,
            spine=n.spine,
            orchestrator=n.orchestrator.name,
            pinned=n.pinned,
            schedulable=n.state not in (Node.State.DRAINED, Node.State.DRAINING, Node.State.DOWN),
        )
        for n in Node.objects.select_related("orchestrator")
    )


def largest_gangs_now() -> dict[int, int]:
    """How many gangs of each GPU count could start right now on free GPUs."""
    return largest_placeable([_engine_node(row) for row in _node_rows()], GANG_SHAPES)


# --------------------------------------------------------------------------------------------------
# Page reads (issue 6). Every function here issues a fixed number of queries, whatever the number of
# teams, nodes or workloads, so pages stay flat as the fleet grows.
# --------------------------------------------------------------------------------------------------

# Raw samples (one per round) for short windows only: a 24-hour chart of 30-second rounds would be 2,880
# points per series, more than a chart can show; hourly rollups draw it from 24.
RAW_MAX_SPAN = timedelta(hours=6)
HOURLY_MAX_SPAN = timedelta(days=31)


@dataclass(frozen=True)
class Point:
    """One step of a usage series; averages over the step, in GPUs (``busy`` None: not measured)."""

    at: datetime
    total: float
    allocated: float
    busy: float | None
    pending: float


def series_resolution(since: datetime, until: datetime, raw_max: timedelta = RAW_MAX_SPAN) -> str:
    """'raw' samples for short windows, then hourly rollups, then daily ones (a year is 365 points)."""
    span = until - since
    if span <= raw_max:
        return "raw"
    return UsageRollup.Resolution.HOUR if span <= HOURLY_MAX_SPAN else UsageRollup.Resolution.DAY


def _series_rows(filters: Q, key: str, since: datetime, until: datetime, raw_max: timedelta):
    """(key, time, total, allocated, busy, pending) averaged per step and summed over the rows of a key."""
    resolution = series_resolution(since, until, raw_max)
    if resolution == "raw":
        rows = (
            UsageSample.objects.filter(filters, taken_at__gte=since, taken_at__lte=until)
            .values(key, "taken_at")
            .annotate(
                total=Sum("gpus_total"),
                allocated=Sum("gpus_allocated"),
                busy=Sum("gpus_busy"),
                pend=Sum("gpus_pending"),
            )
            .order_by("taken_at")
            .values_list(key, "taken_at", "total", "allocated", "busy", "pend")
        )
        yield from rows
        return
    rows = (
        UsageRollup.objects.filter(filters, resolution=resolution, period_start__gte=since, period_start__lte=until)
        .values(key, "period_start")
        .annotate(
            total=Sum("gpu_s_total"),
            allocated=Sum("gpu_s_allocated"),
            busy=Sum("gpu_s_busy"),
            pend=Sum("gpu_s_pending"),
            covered=Max("covered_s"),
        )
        .order_by("period_start")
        .values_list(key, "period_start", "total", "allocated", "busy", "pend", "covered")
    )
    for name, start, total, allocated, busy, pending, covered in rows:
        if covered:
            yield (
                name,
                start,
                total / covered,
                allocated / covered,
                None if busy is None else busy / covered,
                (pending / covered),
            )


def orchestrator_series(since: datetime, until: datetime, raw_max: timedelta = RAW_MAX_SPAN) -> dict[str, list[Point]]:
    """Per orchestrator pool: capacity, allocated, busy and pending GPUs over the window."""
    series: dict[str, list[Point]] = defaultdict(list)
    for name, at, total, allocated, busy, pending in _series_rows(
        Q(team__isnull=True), "orchestrator__name", since, until, raw_max
    ):
        series[name].append(Point(at, total or 0.0, allocated or 0.0, busy, pending or 0.0))
    return dict(series)


def team_series(
    groups: dict[int, str], since: datetime, until: datetime, raw_max: timedelta = timedelta(hours=6)
) -> dict[str, list[Point]]:
    """Allocated (and pending) GPUs over time for groups of teams: ``groups`` maps a team id to the name
    of the series it adds to (a sub-team's whole subtree adds to that sub-team's series)."""
    merged: dict[str, dict[datetime, list[float]]] = defaultdict(dict)
    for team_id, at, _total, allocated, busy, pending in _series_rows(
        Q(team_id__in=list(groups)), "team_id", since, until, raw_max
    ):
        slot = merged[groups[team_id]].setdefault(at, [0.0, 0.0, 0.0])
        slot[0] += allocated or 0.0
        slot[1] += busy or 0.0
        slot[2] += pending or 0.0
    return {
        name: [Point(at, 0.0, v[0], v[1], v[2]) for at, v in sorted(points.items())] for name, points in merged.items()
    }


def busy_now() -> float | None:
    """Busy GPUs fleet-wide from each pool's latest measured sample (busy lags allocation by a round)."""
    from scheduling.selectors_busy import busy_now as measured_busy_now

    return measured_busy_now()


# --- who sees what -----------------------------------------------------------------------------------


def team_tree() -> tuple[dict[int, Team], dict[int | None, list[int]]]:
    """Every team by id, and each parent's children ids (one query)."""
    teams = {t.pk: t for t in Team.objects.all()}
    children: dict[int | None, list[int]] = defaultdict(list)
    for team in sorted(teams.values(), key=lambda t: t.slug):
        children[team.parent_id].append(team.pk)
    return teams, dict(children)


def subtree_ids(team_id: int, children: dict[int | None, list[int]]) -> list[int]:
    ids, stack = [], [team_id]
    while stack:
        current = stack.pop()
        ids.append(current)
        stack.extend(children.get(current, []))
    return ids


def visible_team_ids(user, see_all: bool) -> set[int]:
    """Teams the user may see: all for admins (``see_all``), else the teams they belong to and everything
    below them (the same lineage rule as ``rules.is_member``), from one query: the tree with a flag on the
    user's teams. The API's visibility (``api/access.py``) is this rule too."""
    if see_all:
        return set(Team.objects.values_list("pk", flat=True))
    if not user.is_authenticated:
        return set()
    member = Membership.objects.filter(user=user, team=OuterRef("pk"))
    children: dict[int | None, list[int]] = defaultdict(list)
    mine = []
    for team_id, parent_id, is_member in Team.objects.values_list("pk", "parent_id", Exists(member)):
        children[parent_id].append(team_id)
        if is_member:
            mine.append(team_id)
    return {tid for root in mine for tid in subtree_ids(root, children)}


def lead_team_ids(user, children: dict[int | None, list[int]] | None = None) -> set[int]:
    """Teams the user leads, with everything below them (where they decide quota requests); ``children``
    is ``team_tree()``'s second half when the caller has it already."""
    if children is None:
        _teams, children = team_tree()
    mine = Membership.objects.filter(user=user, role=Membership.Role.LEAD).values_list("team_id", flat=True)
    return {tid for root in mine for tid in subtree_ids(root, children)}


def submittable_teams(user, see_all: bool) -> list[Team]:
    ids = visible_team_ids(user, see_all)
    return sorted((t for t in team_tree()[0].values() if t.pk in ids), key=lambda t: t.slug)


# --- fragmentation --------------------------------------------------------------------------------

DEFAULT_MIX = {1.0: 1.0, 2.0: 1.0, 4.0: 1.0, 8.0: 1.0}


@dataclass(frozen=True)
class NodeCell:
    name: str
    orchestrator: str
    gpu_model: str
    leaf_switch: str
    nvlink_domain: str
    gpu_total: int
    gpu_allocated: int
    schedulable: bool
    fragment: float


@dataclass(frozen=True)
class DomainFragmentation:
    nvlink_domain: str
    leaf_switch: str
    gpu_total: int
    free: int
    unusable: float


@dataclass(frozen=True)
class FragmentationNow:
    nodes: list[NodeCell]
    domains: list[DomainFragmentation]
    fragmented_gpus: float
    free_gpus: float
    placeable: dict[int, int]
    size_mix: dict[float, float]
    mix_observed: bool


_NODE_FIELDS = ("name", "gpu_total", "gpu_model", "gpu_allocated", "nvlink_domain", "leaf_switch", "spine")
_UNSCHEDULABLE = (Node.State.DRAINED, Node.State.DRAINING, Node.State.DOWN)


def _node_rows() -> list[tuple]:
    return list(
        Node.objects.order_by("leaf_switch", "nvlink_domain", "name").values_list(
            *_NODE_FIELDS, "orchestrator__name", "pinned", "state"
        )
    )


def _engine_node(row: tuple, allocated: int | None = None) -> EngineNode:
    name, total, model, alloc, domain, leaf, spine, orch, pinned, state = row
    used = min(total, alloc if allocated is None else allocated)
    return EngineNode(
        name=name,
        gpu_total=total,
        gpu_model=model,
        gpu_free_milli=(0,) * used + (MILLI_PER_GPU,) * (total - used),
        nvlink_domain=domain,
        leaf_switch=leaf,
        spine=spine,
        orchestrator=orch,
        pinned=pinned,
        schedulable=state not in _UNSCHEDULABLE,
    )


def observed_size_mix() -> tuple[dict[float, float], bool]:
    """Members per GPUs-per-member over running and pending work (FGD weighs members, not jobs)."""
    rows = (
        Workload.objects.filter(state__in=Workload.ACTIVE_STATES)
        .values("gpus_per_member")
        .annotate(members=Sum("gang_size"))
        .values_list("gpus_per_member", "members")
    )
    mix = {float(gpus): float(members) for gpus, members in rows if gpus}
    return (mix, True) if mix else (dict(DEFAULT_MIX), False)


def fragmentation_now() -> FragmentationNow:
    rows = _node_rows()
    nodes = [_engine_node(row) for row in rows]
    mix, observed = observed_size_mix()
    report = fragmentation_report(nodes, mix)
    cells = [
        NodeCell(
            n.name,
            n.orchestrator,
            n.gpu_model,
            n.leaf_switch,
            n.nvlink_domain,
            n.gpu_total,
            n.gpu_allocated,
            n.schedulable,
            report.per_node.get(n.name, 0.0),
        )
        for n in nodes
    ]
    domains: dict[str, list[NodeCell]] = defaultdict(list)
    for cell in cells:
        domains[cell.nvlink_domain or cell.name].append(cell)
    per_domain = [
        DomainFragmentation(
            name,
            members[0].leaf_switch,
            sum(c.gpu_total for c in members),
            sum(c.gpu_total - c.gpu_allocated for c in members if c.schedulable),
            report.per_nvlink_domain.get(name, 0.0),
        )
        for name, members in domains.items()
    ]
    per_domain.sort(key=lambda d: (-d.unusable, d.nvlink_domain))
    return FragmentationNow(
        cells, per_domain, report.fragmented_gpus, report.free_gpus, dict(report.largest_placeable), mix, observed
    )


# --- utilisation ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class GpuHours:
    key: str
    label: str
    depth: int
    capacity_h: float | None
    allocated_h: float
    busy_h: float | None


def _rollup_resolution(since: datetime, until: datetime) -> str:
    return UsageRollup.Resolution.HOUR if until - since <= HOURLY_MAX_SPAN else UsageRollup.Resolution.DAY


def gpu_hours_by_orchestrator(since: datetime, until: datetime) -> list[GpuHours]:
    rows = (
        UsageRollup.objects.filter(
            resolution=_rollup_resolution(since, until),
            team__isnull=True,
            period_start__gte=since,
            period_start__lt=until,
        )
        .values("orchestrator__name")
        .annotate(total=Sum("gpu_s_total"), allocated=Sum("gpu_s_allocated"), busy=Sum("gpu_s_busy"))
        .order_by("orchestrator__name")
    )
    return [
        GpuHours(
            r["orchestrator__name"],
            r["orchestrator__name"],
            0,
            (r["total"] or 0) / 3600,
            (r["allocated"] or 0) / 3600,
            None if r["busy"] is None else r["busy"] / 3600,
        )
        for r in rows
    ]


def gpu_hours_by_team(since: datetime, until: datetime, visible: set[int] | None = None) -> list[GpuHours]:
    """GPU-hours per team over the window, each team counting its whole subtree, in tree order."""
    rows = (
        UsageRollup.objects.filter(
            resolution=_rollup_resolution(since, until),
            team__isnull=False,
            period_start__gte=since,
            period_start__lt=until,
        )
        .values("team_id")
        .annotate(allocated=Sum("gpu_s_allocated"), busy=Sum("gpu_s_busy"))
        .values_list("team_id", "allocated", "busy")
    )
    own = {tid: (alloc or 0.0, busy) for tid, alloc, busy in rows}
    teams, children = team_tree()
    result: list[GpuHours] = []

    def walk(parent: int | None, depth: int) -> None:
        for tid in children.get(parent, []):
            subtree = subtree_ids(tid, children)
            allocated = sum(own.get(i, (0.0, None))[0] for i in subtree)
            busy_values = [own[i][1] for i in subtree if i in own and own[i][1] is not None]
            if visible is None or tid in visible:
                result.append(
                    GpuHours(
                        teams[tid].slug,
                        teams[tid].name,
                        depth,
                        None,
                        allocated / 3600,
                        sum(busy_values) / 3600 if busy_values else None,
                    )
                )
            walk(tid, depth + 1)

    walk(None, 0)
    return result


@dataclass(frozen=True)
class WaitStats:
    size: str
    jobs: int
    p50_s: float
    p90_s: float
    p99_s: float


def _percentile(sorted_values: list[float], fraction: float) -> float:
    """Nearest-rank percentile of an ascending list."""
    rank = max(1, -(-len(sorted_values) * fraction // 1))
    return sorted_values[int(rank) - 1]


def size_bucket(gpus: int) -> int:
    for shape in GANG_SHAPES:
        if gpus <= shape:
            return shape
    return GANG_SHAPES[-1] * 2


class SecondsBetween(Func):
    """``end - start`` in seconds, computed by the database itself. Django's own datetime subtraction on
    SQLite calls back into Python for every row (a month of jobs: most of the utilisation page's time)."""

    arg_joiner = " - "
    # EXTRACT returns numeric since PostgreSQL 14: cast, or every row arrives as a Python Decimal.
    template = "CAST(EXTRACT(EPOCH FROM (%(expressions)s)) AS double precision)"
    output_field = FloatField()

    def __init__(self, start: str, end: str) -> None:
        super().__init__(F(end), F(start))

    @property
    def convert_value(self):
        # Both databases already return a float (double precision / REAL): skip Django's float() per row.
        return self._convert_value_noop

    def as_sqlite(self, compiler, connection, **extra_context):
        return self.as_sql(
            compiler, connection, template="((julianday(%(expressions)s)) * 86400.0)", arg_joiner=") - julianday("
        )


def queue_waits(since: datetime, until: datetime) -> list[WaitStats]:
    """Queue wait (start minus submit) p50/p90/p99 per request size, for work that started in the window."""
    rows = (
        Workload.objects.filter(started_at__gte=since, started_at__lt=until)
        .annotate(wait=SecondsBetween("submitted_at", "started_at"))
        .values_list("gang_size", "gpus_per_member", "wait")
    )
    waits: dict[int, list[float]] = defaultdict(list)
    for gang, per_member, wait in rows:
        waits[size_bucket(gang * per_member)].append(max(wait or 0.0, 0.0))
    return wait_stats(waits)


def wait_stats(waits_by_bucket: dict[int, list[float]]) -> list[WaitStats]:
    """Nearest-rank p50/p90/p99 of each request-size bucket's waits (seconds), smallest size first."""
    stats = []
    for bucket in sorted(waits_by_bucket):
        values = sorted(waits_by_bucket[bucket])
        label = f"{bucket} GPU" if bucket <= GANG_SHAPES[-1] else f">{GANG_SHAPES[-1]} GPU"
        stats.append(
            WaitStats(label, len(values), _percentile(values, 0.5), _percentile(values, 0.9), _percentile(values, 0.99))
        )
    return stats


# --- teams ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ShareRow:
    slug: str
    name: str
    target_pct: float
    actual_now_pct: float
    actual_window_pct: float
    allocated_now: int
    gpu_hours: float


@dataclass
class TeamDetail:
    team: Team
    lineage: list[Team]
    children: list[Team]
    subtree: list[int]
    standing: TeamNow | None
    queues: list[Queue]
    series: dict[str, list[Point]]
    series_by: str
    shares: list[ShareRow]


OWN_WORK = "(own work)"


def team_detail(team: Team, since: datetime, until: datetime) -> TeamDetail:
    """A team's standing, its sub-teams' allocation over time and their target vs actual shares."""
    teams, children = team_tree()
    kids = [teams[i] for i in children.get(team.pk, [])]
    groups = {team.pk: OWN_WORK if kids else team.name}
    for kid in kids:
        groups.update(dict.fromkeys(subtree_ids(kid.pk, children), kid.name))
    if kids or until - since > USER_SERIES_MAX_SPAN:
        series, by = team_series(groups, since, until), "sub-team" if kids else "team"
    else:
        series, by = user_series(team.pk, since, until), "user"
    standings = {t.slug: t for t in teams_now()}
    lineage, parent = [], teams.get(team.parent_id)
    while parent is not None:
        lineage.insert(0, parent)
        parent = teams.get(parent.parent_id)
    return TeamDetail(
        team=team,
        lineage=lineage,
        children=kids,
        subtree=list(groups),
        standing=standings.get(team.slug),
        queues=list(Queue.objects.filter(team=team)),
        series=series,
        series_by=by,
        shares=_shares(kids, standings, series),
    )


def _gpu_hours(points: list[Point]) -> float:
    if len(points) < 2:
        return 0.0
    total = 0.0
    for current, following in itertools.pairwise(points):
        total += current.allocated * (following.at - current.at).total_seconds()
    return total / 3600


def _shares(kids: list[Team], standings: dict[str, TeamNow], series: dict[str, list[Point]]) -> list[ShareRow]:
    now_total = sum(standings[k.slug].allocated for k in kids if k.slug in standings) or 0
    hours = {k.name: _gpu_hours(series.get(k.name, [])) for k in kids}
    hours_total = sum(hours.values())
    rows = []
    for kid in kids:
        standing = standings.get(kid.slug)
        allocated = standing.allocated if standing else 0
        rows.append(
            ShareRow(
                kid.slug,
                kid.name,
                standing.weight if standing else 0.0,
                100 * allocated / now_total if now_total else 0.0,
                100 * hours[kid.name] / hours_total if hours_total else 0.0,
                allocated,
                hours[kid.name],
            )
        )
    return rows


# --- fair share -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class QueueValues:
    team_id: int
    gpu_model: str
    weight: float
    guaranteed: int
    burst_limit: int


@dataclass(frozen=True)
class EntitlementRow:
    slug: str
    name: str
    depth: int
    demand: float
    before: float
    after: float
    fair_before: float
    fair_after: float
    reasons: tuple[str, ...]

    @property
    def delta(self) -> float:
        return self.after - self.before


def team_demand() -> tuple[dict[int, float], dict[int, float]]:
    """GPUs each team's own work holds (running) and wants (running + pending) now."""
    rows = (
        Workload.objects.filter(state__in=Workload.ACTIVE_STATES, team__isnull=False)
        .values("team_id")
        .annotate(
            running=Sum(F("gang_size") * F("gpus_per_member"), filter=Q(state=Workload.State.RUNNING)),
            total=Sum(F("gang_size") * F("gpus_per_member")),
        )
        .values_list("team_id", "running", "total")
    )
    held, wanted = {}, {}
    for tid, running, total in rows:
        held[tid], wanted[tid] = float(running or 0), float(total or 0)
    return held, wanted


def entitlement_preview(after: list[QueueValues]) -> list[EntitlementRow]:
    """Entitlements per team (any-model queues) under today's policy and under ``after``, given demand now."""
    teams, children = team_tree()
    before = [
        QueueValues(q.team_id, q.gpu_model, float(q.weight), q.guaranteed, q.burst_limit)
        for q in Queue.objects.filter(gpu_model="")
    ]
    capacity = Node.objects.exclude(state=Node.State.DOWN).aggregate(total=Sum("gpu_total"))["total"] or 0
    held, wanted = team_demand()
    demand = {teams[tid].slug: gpus for tid, gpus in wanted.items() if tid in teams}
    allocation = {teams[tid].slug: gpus for tid, gpus in held.items() if tid in teams}

    def run(values: list[QueueValues]) -> dict[str, Entitlement]:
        by_team = {v.team_id: v for v in values if v.gpu_model == ""}
        specs = [
            TeamSpec(
                name=t.slug,
                parent=teams[t.parent_id].slug if t.parent_id in teams else None,
                weight=by_team[t.pk].weight if t.pk in by_team else 0.0,
                guaranteed=by_team[t.pk].guaranteed if t.pk in by_team else 0,
                burst_limit=by_team[t.pk].burst_limit if t.pk in by_team else None,
            )
            for t in teams.values()
        ]
        return {e.team: e for e in entitlements(specs, float(capacity), demand, allocation)}

    old, new = run(before), run(after)
    rows: list[EntitlementRow] = []

    def walk(parent: int | None, depth: int) -> None:
        for tid in children.get(parent, []):
            slug = teams[tid].slug
            o, n = old.get(slug), new.get(slug)
            rows.append(
                EntitlementRow(
                    slug,
                    teams[tid].name,
                    depth,
                    n.demand if n else 0.0,
                    o.allocation if o else 0.0,
                    n.allocation if n else 0.0,
                    o.fair_share if o else 0.0,
                    n.fair_share if n else 0.0,
                    n.reasons if n else (),
                )
            )
            walk(tid, depth + 1)

    walk(None, 0)
    return rows


def queue_history(limit: int = 100):
    """Entitlement versions, newest first, each with the version before it (for the diff)."""
    history = list(
        Queue.history.select_related("history_user", "team").order_by("-history_date", "-history_id")[:limit]
    )
    ids = {h.id for h in history}
    earlier = defaultdict(list)
    for row in (
        Queue.history.filter(id__in=ids)
        .order_by("history_date", "history_id")
        .values("history_id", "id", "weight", "guaranteed", "burst_limit")
    ):
        earlier[row["id"]].append(row)
    previous: dict[int, dict] = {}
    for rows in earlier.values():
        for before, after in itertools.pairwise(rows):
            previous[after["history_id"]] = before
    return [(h, previous.get(h.history_id)) for h in history]


# --- orchestrators --------------------------------------------------------------------------------


def orchestrator_health(since: datetime) -> list[Orchestrator]:
    """Every orchestrator with its latest scrape (duration, outcome) and its scrape record in the window."""
    latest = CollectorRun.objects.filter(orchestrator=OuterRef("pk")).order_by("-started_at")
    window = Q(runs__started_at__gte=since)
    return list(
        Orchestrator.objects.annotate(
            node_count=Subquery(
                Node.objects.filter(orchestrator=OuterRef("pk"))
                .values("orchestrator")
                .annotate(c=Count("id"))
                .values("c")
            ),
            last_run_at=Subquery(latest.values("started_at")[:1]),
            last_run_ms=Subquery(latest.values("duration_ms")[:1]),
            last_run_ok=Subquery(latest.values("ok")[:1]),
            runs_in_window=Count("runs", filter=window),
            failures_in_window=Count("runs", filter=window & Q(runs__ok=False)),
            max_ms_in_window=Max("runs__duration_ms", filter=window),
        ).order_by("name")
    )


def latest_plan_summary() -> tuple[RebalancePlan | None, list[NodeMove]]:
    plan = RebalancePlan.objects.first()
    if plan is None:
        return None, []
    return plan, list(plan.moves.select_related("node", "source", "target")[:20])


USER_SERIES_MAX_SPAN = timedelta(days=31)


def user_series(
    team_id: int, since: datetime, until: datetime, points: int = 120, top: int = 8
) -> dict[str, list[Point]]:
    """GPUs held by each user of a team over the window, rebuilt from its workloads' start and finish
    times (usage samples are per team, not per user); the ``top`` users by GPU-hours, the rest summed."""
    rows = (
        Workload.objects.filter(team_id=team_id, started_at__lt=until, started_at__isnull=False)
        .filter(Q(finished_at__isnull=True) | Q(finished_at__gt=since))
        .values_list("user", "started_at", "finished_at", "gang_size", "gpus_per_member")
    )
    step = (until - since) / points
    moments = [since + step * i for i in range(points + 1)]
    held: dict[str, list[float]] = defaultdict(lambda: [0.0] * len(moments))
    for user, started, finished, gang, per_member in rows:
        end = finished or until
        first = max(0, int((started - since) / step) + (started > since))
        last = min(len(moments) - 1, int((end - since) / step))
        series = held[user or "(unknown)"]
        for i in range(first, last + 1):
            series[i] += gang * per_member
    ranked = sorted(held, key=lambda name: -sum(held[name]))
    shown = {name: held[name] for name in ranked[:top]}
    if len(ranked) > top:
        shown["other users"] = [sum(held[name][i] for name in ranked[top:]) for i in range(len(moments))]
    return {
        name: [Point(at, 0.0, v, None, 0.0) for at, v in zip(moments, values, strict=True)]
        for name, values in shown.items()
    }
