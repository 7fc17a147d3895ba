"""The weekly capacity report's content: one function per section, each returning plain data.

Figures are in the terms operators use (Slurm ``sreport``, Open XDMoD): GPU-hours, exact to the second
where job records give start and end times (team and user use), and from the collectors' hourly rollups
where only the orchestrator knows (pool capacity, down/drained, planned). ``build_report`` runs the
sections in order and returns a JSON-ready dict; every format (HTML, PDF, CSV, email) renders from it
(``reports/documents.py``).

Composition only: nothing here touches the ORM. Every read comes through the ``reads`` argument
(``selectors.report.WeekReads``: the window's facts as plain data), so a section is plain arithmetic over what it
is handed; ``services/report_delivery.report_content`` is what builds a report from the database.

To add a section, append ``Section(key, title, function)`` to
``SECTIONS``; to add a suggested action, append a function to ``ACTION_RULES``. A section function takes
the window, the sections computed before it (plain dicts) and the reads, and returns a dataclass or dict; a
read it needs that ``WeekReads`` lacks is added there.
"""

from __future__ import annotations

import itertools
import json
import re
from collections import defaultdict
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, is_dataclass
from datetime import datetime, timedelta
from types import SimpleNamespace
from typing import Any
from zoneinfo import ZoneInfo

from django.conf import settings
from django.core.serializers.json import DjangoJSONEncoder

from scheduling.engine.calendar import bounds_at
from scheduling.wording import plural, possessive

# What the sections are handed: ``selectors.report.WeekReads`` (typed loosely here, so this module imports no
# selector; the reads' own signatures are there).
Reads = Any

REPORT_VERSION = 1
HOUR = 3600.0
TOP_USERS = 5
TREND_POINTS = 29  # every 6 hours over a week
LEDGER_LISTED = 20  # the worst findings are listed; the per-kind counts cover every one
OUTLOOK_ACTION_DAYS = 42  # a guarantee running out within six weeks is worth acting on in this report
EXPIRING_WINDOW = timedelta(days=7)


@dataclass(frozen=True)
class Window:
    """The report's period, ``[start, end)``, with the time zone its week is cut in."""

    start: datetime
    end: datetime
    time_zone: str

    @property
    def seconds(self) -> float:
        return (self.end - self.start).total_seconds()

    def previous(self) -> Window:
        span = self.end - self.start
        return Window(self.start - span, self.start, self.time_zone)


def week_before(now: datetime, time_zone: str | None = None) -> Window:
    """The last full week (Monday 00:00 to Monday 00:00 local) before ``now``, in ``TIME_ZONE``."""
    zone = ZoneInfo(time_zone or settings.TIME_ZONE)
    local = now.astimezone(zone)
    monday = (local - timedelta(days=local.isoweekday() - 1)).date()
    end = datetime(monday.year, monday.month, monday.day, tzinfo=zone)
    first = monday - timedelta(days=7)
    return Window(datetime(first.year, first.month, first.day, tzinfo=zone), end, zone.key)


def _h(seconds: float) -> float:
    """GPU-seconds to GPU-hours, kept to the second (rounded only when shown)."""
    return round(seconds / HOUR, 6)


def _pct(part: float, whole: float) -> float | None:
    return round(100.0 * part / whole, 3) if whole else None


# --- 1. period and data completeness ------------------------------------------------------------


@dataclass
class SourceCompleteness:
    """One source over the part of the week it existed (``judged_h``): a source registered during the week is
    not stale before it was registered, and one registered after the week is not judged at all."""

    name: str
    kind: str
    runs: int
    failures: int
    stale_h: float
    longest_stale_h: float
    fresh_pct: float | None
    judged_h: float = 0.0
    registered_on: str | None = None  # set when it was registered after the week began


@dataclass
class Completeness:
    start: str
    end: str
    time_zone: str
    hours: float
    stale_after_s: float
    sources: list[SourceCompleteness]
    # False: nothing at all was recorded this week (no scrape succeeded, no usage, no job ran); such a report
    # is kept for the record and marked so, never "ready to send", never mailed (issue 33 item 7).
    has_data: bool = True


def stale_stretches(
    since: datetime, until: datetime, last_ok_before: datetime | None, runs: list[tuple[datetime, bool]], limit_s: float
) -> list[tuple[datetime, datetime]]:
    """When a source was stale inside ``[since, until)``: its latest attempt had failed, or its latest
    success was more than ``limit_s`` old (the health page's rule, replayed over the week)."""
    stretches: list[tuple[datetime, datetime]] = []
    limit = timedelta(seconds=limit_s)
    last_ok, failed, cursor = last_ok_before, False, since
    for at, ok in [*runs, (until, None)]:
        at = min(max(at, since), until)
        stale_from = cursor if failed or last_ok is None else max(cursor, last_ok + limit)
        if stale_from < at:
            if stretches and stretches[-1][1] == stale_from:
                stretches[-1] = (stretches[-1][0], at)
            else:
                stretches.append((stale_from, at))
        cursor = max(cursor, at)
        if ok is not None:
            failed = not ok
            last_ok = at if ok else last_ok
    return stretches


def completeness_section(window: Window, done: dict, reads: Reads) -> Completeness:
    limit = float(getattr(settings, "GPUPORTAL_REPORT_STALE_AFTER_S", 600))
    sources = [_source_completeness(window, source, limit) for source in reads.source_runs(window.start, window.end)]
    return Completeness(
        window.start.isoformat(),
        window.end.isoformat(),
        window.time_zone,
        _h(window.seconds),
        limit,
        sources,
        reads.recorded_anything(window.start, window.end),
    )


def _source_completeness(window: Window, source: Any, limit: float) -> SourceCompleteness:
    """Judged from its registration on (a source added since is not stale 168 h in a rebuilt past week)."""
    registered = source.registered_at
    later = registered is not None and registered > window.start
    since = min(registered, window.end) if later and registered else window.start
    registered_on = registered.astimezone(ZoneInfo(window.time_zone)).date().isoformat() if later else None
    judged_s = (window.end - since).total_seconds()
    stretches = stale_stretches(since, window.end, source.last_ok_before, source.runs, limit) if judged_s else []
    lengths = [(b - a).total_seconds() for a, b in stretches]
    return SourceCompleteness(
        source.name,
        source.kind,
        len(source.runs),
        sum(1 for _at, ok in source.runs if not ok),
        _h(sum(lengths)),
        _h(max(lengths, default=0.0)),
        round(100.0 - (_pct(sum(lengths), judged_s) or 0.0), 3) if judged_s else None,
        _h(judged_s),
        registered_on,
    )


# --- 2. capacity per pool ------------------------------------------------------------------------


@dataclass
class PoolCapacity:
    name: str
    kind: str
    capacity_h: float
    allocated_h: float
    idle_h: float
    unavailable_h: float
    planned_h: float
    pending_h: float
    busy_h: float | None
    allocation_pct: float | None
    coverage_pct: float | None


@dataclass
class Capacity:
    pools: list[PoolCapacity]
    fleet: PoolCapacity


def _pool_row(name: str, kind: str, p: Any, period_s: float) -> PoolCapacity:
    """``p``: a pool's GPU-seconds (``selectors.report.PoolSeconds``, or the fleet's sum), None when unknown."""
    total, allocated = (p.total, p.allocated) if p else (0.0, 0.0)
    unavailable, planned = (p.unavailable, p.planned) if p else (0.0, 0.0)
    idle = max(total - allocated - unavailable - planned, 0.0)
    return PoolCapacity(
        name,
        kind,
        _h(total),
        _h(allocated),
        _h(idle),
        _h(unavailable),
        _h(planned),
        _h(p.pending if p else 0.0),
        None if p is None or p.busy is None else _h(p.busy),
        _pct(allocated, total),
        _pct(p.covered_s, period_s) if p else None,
    )


def capacity_section(window: Window, done: dict, reads: Reads) -> Capacity:
    pools = reads.pool_seconds(window.start, window.end)
    rows = [_pool_row(p.name, p.kind, p, window.seconds) for p in pools]
    busy = [p.busy for p in pools if p.busy is not None]
    fleet = SimpleNamespace(
        total=sum(p.total for p in pools),
        allocated=sum(p.allocated for p in pools),
        unavailable=sum(p.unavailable for p in pools),
        planned=sum(p.planned for p in pools),
        pending=sum(p.pending for p in pools),
        busy=sum(busy) if busy else None,
        covered_s=max((p.covered_s for p in pools), default=0.0),
    )
    return Capacity(rows, _pool_row("fleet", "all", fleet if pools else None, window.seconds))


# --- 3. teams ------------------------------------------------------------------------------------


@dataclass
class TopUser:
    user: str
    gpu_h: float


@dataclass
class TeamUse:
    slug: str
    name: str
    parent: str | None
    depth: int
    target_pct: float
    actual_pct: float | None
    guaranteed_gpus: float
    burst_limit_gpus: float
    guaranteed_h: float
    used_h: float
    burst_h: float
    within_guarantee_h: float
    measured_allocated_h: float | None
    busy_h: float | None
    busy_pct: float | None
    policy_changes: int
    top_users: list[TopUser] = field(default_factory=list)


@dataclass
class Teams:
    teams: list[TeamUse]
    total_used_h: float
    policy_segments: list[str]
    policy_history_starts: str | None


def policy_segments(window: Window, reads: Reads) -> list[tuple[datetime, datetime, dict[int, Any]]]:
    """The entitlements in force over the week, as segments between policy changes."""
    moments = [window.start, *reads.queue_change_moments(window.start, window.end), window.end]
    return [(a, b, reads.queues_as_of(a)) for a, b in itertools.pairwise(moments) if b > a]


def _integrate_over(
    intervals: list[Any], guarantee_steps: list[tuple[datetime, datetime, float]]
) -> tuple[float, float]:
    """(GPU-seconds held, GPU-seconds held above the guarantee in force) for one team's intervals."""
    events: dict[datetime, float] = defaultdict(float)
    for item in intervals:
        events[item.start] += item.gpus
        events[item.end] -= item.gpus
    for start, _end, _gpus in guarantee_steps:
        events.setdefault(start, 0.0)
    moments = sorted(events)
    held = used = burst = 0.0
    for moment, following in itertools.pairwise(moments):
        held += events[moment]
        span = (following - moment).total_seconds()
        guaranteed = next((g for a, b, g in guarantee_steps if a <= moment < b), 0.0)
        used += held * span
        burst += max(held - guaranteed, 0.0) * span
    return used, burst


def teams_section(window: Window, done: dict, reads: Reads) -> Teams:
    tree = reads.team_tree()
    teams = tree.teams
    segments = policy_segments(window, reads)
    intervals = reads.held_intervals(window.start, window.end)
    by_team: dict[int | None, list[Any]] = defaultdict(list)
    for item in intervals:
        by_team[item.team_id].append(item)
    efficiency = {e.key: e for e in reads.efficiency_by_team(window.start, window.end)}
    used_of = {tid: _subtree_intervals(tid, tree, by_team) for tid in teams}
    used_s = {tid: sum(i.gpus * (i.end - i.start).total_seconds() for i in v) for tid, v in used_of.items()}
    rows: list[TeamUse] = []
    for team, depth in tree.walk():
        siblings = {tid: used_s[tid] for tid in tree.children[team.parent_id]}  # actual % is of the siblings' use
        rows.append(_team_row(tree, team.pk, depth, segments, used_of[team.pk], siblings, efficiency))
    described = [
        f"{a.isoformat()} – {b.isoformat()}: "
        + ", ".join(f"{teams[q.team_id].slug} {q.weight:g} %/{q.guaranteed}" for q in v.values() if q.team_id in teams)
        for a, b, v in segments
    ]
    first = reads.policy_history_starts()
    return Teams(
        rows,
        _h(sum(i.gpus * (i.end - i.start).total_seconds() for i in intervals)),
        described,
        first.isoformat() if first and first > window.start else None,
    )


def _subtree_intervals(tid: int, tree: Any, by_team: dict) -> list[Any]:
    return [item for member in tree.subtree(tid) for item in by_team.get(member, [])]


def _team_row(tree: Any, tid, depth, segments, intervals, sibling_used, efficiency) -> TeamUse:
    teams, team = tree.teams, tree.teams[tid]
    steps = [(a, b, float(v[tid].guaranteed) if tid in v else 0.0) for a, b, v in segments]
    period = sum((b - a).total_seconds() for a, b, _v in segments) or 1.0

    def averaged(attribute: str) -> float:
        total = sum(getattr(v[tid], attribute) * (b - a).total_seconds() for a, b, v in segments if tid in v)
        return round(total / period, 4)

    used, burst = _integrate_over(intervals, steps)
    subtree = tree.subtree(tid)
    measured = [efficiency[teams[m].slug] for m in subtree if teams[m].slug in efficiency]
    allocated_m = sum(e.allocated_h for e in measured) if measured else None
    busy_m = sum(e.busy_h or 0.0 for e in measured) if measured else None
    users: dict[str, float] = defaultdict(float)
    for item in intervals:
        users[item.user] += item.gpus * (item.end - item.start).total_seconds()
    top = sorted(users.items(), key=lambda kv: (-kv[1], kv[0]))[:TOP_USERS]
    return TeamUse(
        slug=team.slug,
        name=team.name,
        parent=tree.parent_slug(tid),
        depth=depth,
        target_pct=averaged("weight"),
        actual_pct=_pct(used, sum(sibling_used.values())),
        guaranteed_gpus=averaged("guaranteed"),
        burst_limit_gpus=averaged("burst_limit"),
        guaranteed_h=_h(sum(g * (b - a).total_seconds() for a, b, g in steps)),
        used_h=_h(used),
        burst_h=_h(burst),
        within_guarantee_h=_h(used - burst),
        measured_allocated_h=None if allocated_m is None else round(allocated_m, 6),
        busy_h=None if busy_m is None else round(busy_m, 6),
        busy_pct=_pct(busy_m, allocated_m) if allocated_m else None,
        policy_changes=max(len(segments) - 1, 0),
        top_users=[TopUser(user, _h(seconds)) for user, seconds in top],
    )


# --- 4. queue waits ------------------------------------------------------------------------------


@dataclass
class WaitRow:
    orchestrator: str
    size: str
    jobs: int
    p50_s: float
    p90_s: float
    p99_s: float


@dataclass
class ReasonRow:
    reason: str
    workloads: int
    gpus: int
    orchestrators: list[str]


@dataclass
class Waits:
    by_size: list[WaitRow]
    by_orchestrator: list[WaitRow]
    pending_reasons: list[ReasonRow]


def _wait_rows(groups: dict[str, list[Any]]) -> list[WaitRow]:
    """One row per orchestrator and request size, from each one's per-size wait percentiles."""
    return [
        WaitRow(orch, s.size, s.jobs, s.p50_s, s.p90_s, s.p99_s)
        for orch, stats in sorted(groups.items())
        for s in stats
    ]


def reason_pattern(reason: str) -> str:
    """One line per kind of reason: numbers become N so "no 16 free GPUs" and "no 8 free GPUs" group."""
    return re.sub(r"\d+(\.\d+)?", "N", reason.strip())[:200]


def waits_section(window: Window, done: dict, reads: Reads) -> Waits:
    fleet, by_orchestrator = reads.started_wait_stats(window.start, window.end)
    reasons: dict[str, list] = {}
    for orch, reason, gpus in reads.pending_reasons(window.start, window.end):
        entry = reasons.setdefault(reason_pattern(reason), [0, 0, set()])
        entry[0], entry[1] = entry[0] + 1, entry[1] + gpus
        entry[2].add(orch)
    ranked = sorted(reasons.items(), key=lambda kv: (-kv[1][1], -kv[1][0], kv[0]))[:10]
    return Waits(
        _wait_rows({"all": fleet}),
        _wait_rows(by_orchestrator),
        [ReasonRow(text, count, gpus, sorted(orchs)) for text, (count, gpus, orchs) in ranked],
    )


# --- 5. fragmentation ----------------------------------------------------------------------------


@dataclass
class FragmentationSample:
    at: str
    free: float
    fragmented: float
    largest_gang: int


@dataclass
class Fragmentation:
    average_fragmented: float
    average_free: float
    largest_gang_min: int
    largest_gang_max: int
    points: list[FragmentationSample]


def fragmentation_section(window: Window, done: dict, reads: Reads) -> Fragmentation:
    trend = reads.fragmentation_trend(window.start, window.end, points=TREND_POINTS)
    points = [
        FragmentationSample(
            p.at.isoformat(),
            round(p.free, 3),
            round(p.fragmented, 3),
            max((size for size, count in p.placeable.items() if count), default=0),
        )
        for p in trend
    ]
    count = len(points) or 1
    return Fragmentation(
        round(sum(p.fragmented for p in points) / count, 3),
        round(sum(p.free for p in points) / count, 3),
        min((p.largest_gang for p in points), default=0),
        max((p.largest_gang for p in points), default=0),
        points,
    )


# --- 6. rebalancing ------------------------------------------------------------------------------


@dataclass
class MoveSummary:
    source: str
    target: str
    nodes: int
    gpus: int


@dataclass
class FloorRow:
    orchestrator: str
    floor_max: int
    hours_with_floor: int
    hours_held: int
    hours_breached: int
    hours_unknown: int
    worst_shortfall_gpus: float
    lowest_owned_gpus: float | None


@dataclass
class Rebalancing:
    moves: int
    gpus_moved: int
    by_direction: list[MoveSummary]
    plans: dict[str, int]
    floors: list[FloorRow]


def _hours(window: Window) -> list[datetime]:
    hours, moment = [], window.start
    while moment < window.end:
        hours.append(moment)
        moment += timedelta(hours=1)
    return hours


def floor_rows(window: Window, reads: Reads) -> list[FloorRow]:
    """Each hour of the week: the floor in force (the policies as they stood that day) against the GPUs
    the pool owned that hour; an hour without a rollup is unknown, never counted as held."""
    zone = ZoneInfo(window.time_zone)
    owned = reads.pool_hours_owned(window.start, window.end)
    rules_by_day: dict[object, list] = {}
    tally: dict[str, dict] = {}
    for hour in _hours(window):
        local = hour.astimezone(zone)
        day = local.date()
        if day not in rules_by_day:
            rules_by_day[day] = reads.pool_rule_set_as_of(hour)
        for name, bound in bounds_at(rules_by_day[day], local.isoweekday(), local.hour * 60 + local.minute).items():
            if bound.floor_gpus <= 0:
                continue
            row = tally.setdefault(name, {"floor": 0, "with": 0, "held": 0, "breached": 0, "unknown": 0, "worst": 0.0})
            row["floor"], row["with"] = max(row["floor"], bound.floor_gpus), row["with"] + 1
            have = owned.get(name, {}).get(hour)
            if have is None:
                row["unknown"] += 1
            elif have + 1e-9 < bound.floor_gpus:
                row["breached"] += 1
                row["worst"] = max(row["worst"], bound.floor_gpus - have)
            else:
                row["held"] += 1
    return [
        FloorRow(
            name,
            t["floor"],
            t["with"],
            t["held"],
            t["breached"],
            t["unknown"],
            round(t["worst"], 3),
            round(min(owned[name].values()), 3) if owned.get(name) else None,
        )
        for name, t in sorted(tally.items())
    ]


def rebalancing_section(window: Window, done: dict, reads: Reads) -> Rebalancing:
    moves = reads.moves_done(window.start, window.end)
    directions: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0])
    for move in moves:
        entry = directions[(move.source, move.target)]
        entry[0], entry[1] = entry[0] + 1, entry[1] + move.gpus
    return Rebalancing(
        len(moves),
        sum(m.gpus for m in moves),
        [MoveSummary(s, t, n, g) for (s, t), (n, g) in sorted(directions.items())],
        reads.plans_by_state(window.start, window.end),
        floor_rows(window, reads),
    )


# --- 7. quota requests ---------------------------------------------------------------------------

APPROVED_STATES = ("approved", "active", "expired", "revoked")


@dataclass
class ExpiringGrant:
    request: int
    team: str
    gpus: int
    gpu_model: str
    ends_at: str


@dataclass
class Quota:
    filed: int
    filed_gpus: int
    approved: int
    approved_gpus: int
    denied: int
    denied_gpus: int
    expiring_next_week: list[ExpiringGrant]


def quota_section(window: Window, done: dict, reads: Reads) -> Quota:
    facts = reads.quota_facts(window.start, window.end, window.end + EXPIRING_WINDOW)
    approved = [gpus for _team, state, gpus in facts.decided if state in APPROVED_STATES]
    denied = [gpus for _team, state, gpus in facts.decided if state == "denied"]
    return Quota(
        len(facts.filed),
        sum(g for _t, g in facts.filed),
        len(approved),
        sum(approved),
        len(denied),
        sum(denied),
        [ExpiringGrant(r, t, g, m or "any", e.isoformat()) for r, t, g, m, e in facts.expiring],
    )


# --- 8. trend and suggested actions --------------------------------------------------------------

HEADLINE_KEYS = (
    ("capacity_h", "Capacity GPU-h"),
    ("allocated_h", "Allocated GPU-h"),
    ("allocation_pct", "Allocation %"),
    ("idle_h", "Idle GPU-h"),
    ("unavailable_h", "Down/drained GPU-h"),
    ("pending_h", "Pending demand GPU-h"),
    ("p90_wait_s", "p90 queue wait"),  # seconds, shown as a duration (the CSV keeps seconds: its key says so)
    ("fragmented_avg", "Free-but-unusable GPUs (avg)"),
    ("floor_breach_hours", "Floor-breach hours"),
    ("stale_h", "Source stale hours"),
)


@dataclass
class LedgerKind:
    kind: str
    label: str
    findings: int
    open_h: float
    open_at_end: int


@dataclass
class LedgerEntry:
    kind: str
    severity: str
    node: str
    orchestrators: list[str]
    opened_at: datetime
    closed_at: datetime | None
    open_h: float
    explanation: str


@dataclass
class Ledger:
    kinds: list[LedgerKind]
    findings: list[LedgerEntry]
    listed_of: int


def ledger_section(window: Window, done: dict, reads: Reads) -> Ledger:
    """Ownership drift the GPU ledger saw this week: per kind how many findings and how long they stayed
    open, and the worst findings themselves (most severe and longest open first)."""
    records = reads.ledger_findings_between(window.start, window.end)
    kinds: dict[str, LedgerKind] = {}
    for r in records:
        row = kinds.setdefault(r.kind, LedgerKind(r.kind, r.kind_label, 0, 0.0, 0))
        row.findings += 1
        row.open_h = round(row.open_h + _h(r.open_seconds_in_window), 3)
        row.open_at_end += r.closed_at is None or r.closed_at >= window.end
    entries = [
        LedgerEntry(
            r.kind,
            r.severity,
            r.node,
            list(r.orchestrators),
            r.opened_at,
            r.closed_at,
            round(_h(r.open_seconds_in_window), 3),
            r.explanation,
        )
        for r in records[:LEDGER_LISTED]
    ]
    return Ledger(sorted(kinds.values(), key=lambda k: -k.open_h), entries, len(records))


def headline(sections: dict) -> dict[str, float | None]:
    """The week in ten figures, from the sections' plain data (also read from a stored report)."""
    fleet = sections.get("capacity", {}).get("fleet", {})
    waits = [w for w in sections.get("waits", {}).get("by_size", [])]
    jobs = sum(w["jobs"] for w in waits)
    return {
        "capacity_h": fleet.get("capacity_h"),
        "allocated_h": fleet.get("allocated_h"),
        "allocation_pct": fleet.get("allocation_pct"),
        "idle_h": fleet.get("idle_h"),
        "unavailable_h": fleet.get("unavailable_h"),
        "pending_h": fleet.get("pending_h"),
        # Jobs-weighted p90 of the size buckets: an approximation the stored reports can repeat exactly.
        "p90_wait_s": round(sum(w["p90_s"] * w["jobs"] for w in waits) / jobs, 1) if jobs else None,
        "fragmented_avg": sections.get("fragmentation", {}).get("average_fragmented"),
        "floor_breach_hours": sum(f["hours_breached"] for f in sections.get("rebalancing", {}).get("floors", [])),
        "stale_h": round(sum(s["stale_h"] for s in sections.get("completeness", {}).get("sources", [])), 3),
    }


@dataclass
class TrendRow:
    key: str
    label: str
    current: float | None
    previous: float | None
    change: float | None


@dataclass
class Action:
    rule: str
    severity: str
    text: str


@dataclass
class Trend:
    previous_source: str
    rows: list[TrendRow]
    actions: list[Action]


@dataclass
class GuaranteeOutlook:
    team: str
    name: str
    guaranteed: float
    demand_now: float
    trend_per_day: float
    exhausted_on: str | None
    days_left: int | None
    sentence: str


@dataclass
class Outlook:
    as_of: datetime
    teams: list[GuaranteeOutlook]


def outlook_section(window: Window, done: dict, reads: Reads) -> Outlook:
    """The demand forecast at the week's end: when each team's mean demand reaches its guarantee."""
    end_day = window.end.astimezone(ZoneInfo(window.time_zone)).date()
    rows = []
    for item in reads.outlook(window.end):
        days = None if item.on is None else (item.on - end_day).days
        rows.append(
            GuaranteeOutlook(
                item.team,
                item.name,
                item.guaranteed,
                round(item.level_now, 2),
                round(item.trend_per_day, 3),
                item.on.isoformat() if item.on else None,
                days,
                item.sentence,
            )
        )
    rows.sort(key=lambda row: (row.days_left is None, row.days_left or 0, row.name))
    return Outlook(window.end, rows)


def _previous_headline(window: Window, reads: Reads) -> tuple[dict, str]:
    stored = reads.previous_content(window.start)
    if stored and "headline" in stored:
        return stored["headline"], "stored report"
    earlier = window.previous()
    sections: dict = {}
    for section in SECTIONS:
        if section.key in HEADLINE_SECTIONS:
            sections[section.key] = to_plain(section.build(earlier, sections, reads))
    return headline(sections), "recomputed"


def trend_section(window: Window, done: dict, reads: Reads) -> Trend:
    now, (before, source) = headline(done), _previous_headline(window, reads)
    rows = []
    for key, label in HEADLINE_KEYS:
        current, previous = now.get(key), before.get(key)
        change = None if current is None or previous is None else round(current - previous, 3)
        rows.append(TrendRow(key, label, current, previous, change))
    actions = [action for rule in ACTION_RULES for action in rule(done, now, before)]
    order = {"high": 0, "medium": 1, "low": 2}
    actions.sort(key=lambda a: order.get(a.severity, 3))
    return Trend(source, rows, actions[:10])


def _no_data(done, now, before):
    if not done.get("completeness", {}).get("has_data", True):
        yield Action(
            "no-data",
            "high",
            "Nothing was recorded this week (no scrape succeeded, no usage was sampled, no job ran): the portal "
            "was not collecting, or no source was registered yet. This report is not sent.",
        )


def _stale_sources(done, now, before):
    completeness = done.get("completeness", {})
    if not completeness.get("has_data", True):
        return  # one no-data action says it, not one "stale 168 h" per source
    for s in completeness.get("sources", []):
        if s["stale_h"] >= 1:
            yield Action(
                "stale-source",
                "high" if s["stale_h"] >= 24 else "medium",
                f"Source {s['name']} was stale {s['stale_h']:.1f} h{_of_registered(s)} "
                f"({plural(s['failures'], 'failed scrape')}): check its endpoint and credentials; its figures this "
                "week are incomplete.",
            )


def _of_registered(source: dict) -> str:
    if not source.get("registered_on"):
        return ""
    return f" of the {source['judged_h']:.0f} h since it was registered on {source['registered_on']}"


def _floor_breaches(done, now, before):
    for f in done.get("rebalancing", {}).get("floors", []):
        if f["hours_breached"]:
            yield Action(
                "floor-breached",
                "high",
                f"The floor of {f['orchestrator']} ({f['floor_max']} GPUs) was breached for {f['hours_breached']} h "
                f"(short by up to {f['worst_shortfall_gpus']:g} GPUs): pin nodes to it or lower the rebalancer's "
                "hold time before the floor window.",
            )


def _down_capacity(done, now, before):
    fleet = done.get("capacity", {}).get("fleet", {})
    if fleet.get("capacity_h") and fleet["unavailable_h"] >= 0.05 * fleet["capacity_h"]:
        yield Action(
            "down-capacity",
            "medium",
            f"{fleet['unavailable_h']:.0f} GPU-h ({100 * fleet['unavailable_h'] / fleet['capacity_h']:.0f} % of "
            "capacity) sat on down or drained nodes: return them to service or retire them from the pools.",
        )


def _guarantees(done, now, before):
    for t in done.get("teams", {}).get("teams", []):
        if t["depth"] != 0 or not t["guaranteed_h"]:
            continue
        if t["used_h"] < 0.5 * t["guaranteed_h"]:
            yield Action(
                "guarantee-underused",
                "low",
                f"{t['name']} used {t['used_h']:.0f} of {t['guaranteed_h']:.0f} guaranteed GPU-h: its guarantee "
                "could shrink, or its idle share is lent as burst.",
            )
        elif t["burst_h"] > 0.5 * t["used_h"]:
            yield Action(
                "burst-dependent",
                "medium",
                f"{t['name']} ran {t['burst_h']:.0f} of {t['used_h']:.0f} GPU-h above its guarantee: raise the "
                "guarantee or file a quota request, or its work is first to be preempted.",
            )


def _idle_allocations(done, now, before):
    for t in done.get("teams", {}).get("teams", []):
        if t["busy_pct"] is not None and t["busy_pct"] < 50 and (t["measured_allocated_h"] or 0) >= 24:
            yield Action(
                "idle-allocation",
                "medium",
                f"{possessive(t['name'])} GPUs were busy only {t['busy_pct']:.0f} % of the time they were "
                "allocated: see the idle-allocated jobs on the utilisation page.",
            )


def _fragmentation(done, now, before):
    frag = done.get("fragmentation", {})
    pending = done.get("capacity", {}).get("fleet", {}).get("pending_h") or 0
    if frag.get("average_fragmented", 0) >= 8 and pending > 0:
        yield Action(
            "fragmentation",
            "medium",
            f"On average {frag['average_fragmented']:.0f} free GPUs could not serve any waiting request size while "
            "work was pending: use the fragmentation-aware placement policy or pack small jobs onto fewer nodes.",
        )


def _expiring_grants(done, now, before):
    grants = done.get("quota", {}).get("expiring_next_week", [])
    if grants:
        teams = sorted({g["team"] for g in grants})
        yield Action(
            "grants-expiring",
            "low",
            f"{plural(len(grants), 'quota grant')} ({plural(sum(g['gpus'] for g in grants), 'GPU')}) "
            f"expire{'s' if len(grants) == 1 else ''} next week for "
            f"{', '.join(teams)}: renew them before the work that relies on them is preempted.",
        )


def _allocation_drop(done, now, before):
    current, previous = now.get("allocation_pct"), before.get("allocation_pct")
    if current is not None and previous is not None and previous - current >= 10:
        yield Action(
            "allocation-drop",
            "medium",
            f"Allocation fell from {previous:.0f} % to {current:.0f} % week over week: check the pending reasons.",
        )


def _guarantee_outlook(done, now, before):
    for row in done.get("outlook", {}).get("teams", []):
        days = row["days_left"]
        if days is not None and days <= OUTLOOK_ACTION_DAYS:
            yield Action(
                "guarantee-exhaustion",
                "high" if days <= 14 else "medium",
                f"{row['sentence']} Raise its guarantee, file a quota request, or try the added capacity on the "
                "what-if page before then.",
            )


def _ledger_drift(done, now, before):
    for kind in done.get("ledger", {}).get("kinds", []):
        if kind["open_at_end"]:
            yield Action(
                "ledger-drift",
                "high" if kind["kind"] == "double_ownership" else "medium",
                f"{plural(kind['open_at_end'], kind['label'].lower() + ' finding')} "
                f"{'was' if kind['open_at_end'] == 1 else 'were'} still open at the week's end "
                f"({kind['open_h']:.1f} h open this week in all): see the ledger page for each node's explanation.",
            )


ActionRule = Callable[[dict, dict, dict], object]
# Suggested actions, each a clear rule over the report's own data; forecast-based rules append here.
ACTION_RULES: list[ActionRule] = [
    _no_data,
    _stale_sources,
    _floor_breaches,
    _down_capacity,
    _guarantees,
    _idle_allocations,
    _fragmentation,
    _expiring_grants,
    _allocation_drop,
    _guarantee_outlook,
    _ledger_drift,
]


# --- assembly ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Section:
    key: str
    title: str
    build: Callable[[Window, dict, Reads], object]


SECTIONS: list[Section] = [
    Section("completeness", "1. Period and data completeness", completeness_section),
    Section("capacity", "2. Capacity per pool (GPU-hours)", capacity_section),
    Section("teams", "3. Teams: guaranteed, used and burst", teams_section),
    Section("waits", "4. Queue waits and pending reasons", waits_section),
    Section("fragmentation", "5. Fragmentation", fragmentation_section),
    Section("rebalancing", "6. Rebalancing and pool floors", rebalancing_section),
    Section("quota", "7. Quota requests", quota_section),
    # Computed before the trend, whose suggested actions read them; rendered after it.
    Section("ledger", "9. GPU ledger: ownership drift", ledger_section),
    Section("outlook", "Demand outlook (forecast at the week's end)", outlook_section),
    Section("trend", "8. Week over week and suggested actions", trend_section),
]
HEADLINE_SECTIONS = {"completeness", "capacity", "waits", "fragmentation", "rebalancing"}


def to_plain(value) -> dict:
    """Dataclasses and datetimes to JSON types, as they will read back from the database."""
    data = asdict(value) if is_dataclass(value) and not isinstance(value, type) else value
    return json.loads(json.dumps(data, cls=DjangoJSONEncoder))


def build_report(window: Window, reads: Reads) -> dict:
    """The report's content for ``window``, composed from ``reads`` (``selectors.report.WeekReads``)."""
    sections: dict = {}
    for section in SECTIONS:
        sections[section.key] = to_plain(section.build(window, sections, reads))
    return {
        "version": REPORT_VERSION,
        "period": {"start": window.start.isoformat(), "end": window.end.isoformat(), "time_zone": window.time_zone},
        "titles": {s.key: s.title for s in SECTIONS},
        "order": [s.key for s in SECTIONS],
        "headline": headline(sections),
        "sections": sections,
    }
