"""The fleet's fragmentation over time: stored per-round samples, and a replay for history before them.

Each collection round stores one ``FragmentationSample`` (services/fragmentation.py), so the trend is a
read of one stored row per chart point. History older than the first sample (a fleet that ran before
samples were stored) is rebuilt from where workloads ran, on today's topology: bounded by the trend's
window (at most a week), and ``manage.py backfill_fragmentation`` turns it into stored rows once.
"""

from bisect import bisect_right
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import reduce
from operator import or_

from django.db.models import Q, Subquery
from django.db.models.functions import Coalesce

from scheduling.engine.fragmentation import MAX_GPUS_PER_MEMBER, fragmented_gpus, largest_placeable
from scheduling.engine.types import Node as EngineNode
from scheduling.models import FragmentationSample, Node, Workload, node_key
from scheduling.selectors.engine_inputs import engine_node, node_rows
from scheduling.selectors.fleet import GANG_SHAPES
from scheduling.selectors.fragmentation import observed_size_mix


@dataclass(frozen=True)
class FragmentationPoint:
    at: datetime
    free: float
    fragmented: float
    placeable: dict[int, int]

    @property
    def largest_gang(self) -> int:
        return max((size for size, count in self.placeable.items() if count), default=0)


class FleetScorer:
    """Scores fleets of today's nodes with given GPUs in use. A node's fragmentation depends only on its
    size, model and GPUs in use, so a fleet is a multiset of a few distinct shapes: the engine scores each
    shape once and the scorer adds them up (so scoring many moments costs little more than one)."""

    def __init__(self, rows: Sequence[tuple] | None = None, mix: Mapping[float, float] | None = None) -> None:
        rows = node_rows() if rows is None else rows
        self.schedulable = [row for row in rows if row[-1] not in Node.UNSCHEDULABLE]
        self.mix = observed_size_mix()[0] if mix is None else mix
        self.shapes: dict[tuple, tuple[EngineNode, float, dict[int, int]]] = {}

    def score(self, at: datetime, used: Mapping[str, int] | None = None) -> FragmentationPoint:
        """The fleet at ``at`` with ``used`` GPUs per node name (``None``: each node's current count)."""
        counts: dict[tuple, int] = defaultdict(int)
        fragmented = free = 0.0
        for row in self.schedulable:
            total = row[1]
            busy = min(total, max(row[3] if used is None else used.get(row[0], 0), 0))
            key = (total, row[2], busy, row[7])  # the pool (model, orchestrator): a gang starts within one
            if key not in self.shapes:
                shape = engine_node(row, allocated=busy)
                self.shapes[key] = (shape, fragmented_gpus([shape], self.mix), largest_placeable([shape], GANG_SHAPES))
            counts[key] += 1
            fragmented += self.shapes[key][1]
            free += total - busy
        return FragmentationPoint(at, free, fragmented, self._placeable_sum(counts))

    def _placeable_sum(self, counts: dict[tuple, int]) -> dict[int, int]:
        """``largest_placeable`` of the fleet from each shape's own answer: gangs up to one host (8 GPUs)
        are counted per node, so they add up; larger gangs are whole 8-GPU members within one pool (model and
        orchestrator), so they are each pool's 8-GPU slots divided by the members a gang needs, summed (the
        engine's own rule)."""
        totals: dict[int, int] = dict.fromkeys(GANG_SHAPES, 0)
        slots: dict[tuple, int] = defaultdict(int)
        for key, count in counts.items():
            for size, placeable in self.shapes[key][2].items():
                if size <= MAX_GPUS_PER_MEMBER:
                    totals[size] += placeable * count
            slots[(key[1], key[3])] += self.shapes[key][2].get(MAX_GPUS_PER_MEMBER, 0) * count
        for size in GANG_SHAPES:
            if size > MAX_GPUS_PER_MEMBER:
                totals[size] = sum(pool // (size // MAX_GPUS_PER_MEMBER) for pool in slots.values())
        return totals


def fleet_fragmentation(at: datetime) -> FragmentationPoint:
    """The fleet now, from the nodes' current GPU counts (what a collection round stores)."""
    return FleetScorer().score(at)


def replayed_fragmentation(moments: Sequence[datetime]) -> list[FragmentationPoint]:
    """Fragmentation at each of ``moments`` (ascending), rebuilt from where workloads ran (their recorded
    GPUs) on today's topology: for history that no round sampled."""
    if not moments:
        return []
    since, until = moments[0], moments[-1]
    # The start bound goes through COALESCE so that SQLite does not pick the start-time index for it:
    # nearly every job started before the window's end, and walking that index costs seconds' worth of
    # random reads where a scan filtered on the finish time reads each row once.
    placements = (
        Workload.objects.alias(start=Coalesce("started_at", "submitted_at"))
        .filter(start__lte=until)
        .filter(Q(finished_at__isnull=True) | Q(finished_at__gt=since))
        .exclude(nodes=[])
        .order_by()
        .values_list("started_at", "finished_at", "nodes", "orchestrator__node_domain")
    )
    events: list[tuple[datetime, int, str, int]] = []
    for started, finished, where, domain in placements:
        if started is None:
            continue  # pending work holds no GPUs
        for member in where or ():
            gpus = len(member.get("gpus", ())) if isinstance(member, dict) else 0
            if gpus:
                node = node_key(domain, member["node"])  # as node_rows names the fleet's nodes
                events.append((started, 1, node, gpus))
                if finished is not None:
                    events.append((finished, 0, node, gpus))
    events.sort(key=lambda e: (e[0], e[1]))
    scorer = FleetScorer()
    used: dict[str, int] = defaultdict(int)
    trend, index = [], 0
    for moment in moments:
        while index < len(events) and events[index][0] <= moment:
            _at, starts, node, gpus = events[index]
            used[node] += gpus if starts else -gpus
            index += 1
        trend.append(scorer.score(moment, used))
    return trend


def trend_moments(since: datetime, until: datetime, points: int) -> list[datetime]:
    step = (until - since) / max(points - 1, 1)
    return [since + step * i for i in range(points)]


SAMPLE_FIELDS = ("taken_at", "gpus_free", "gpus_fragmented", "placeable")


def sampled_fragmentation(moments: Sequence[datetime], tolerance: timedelta) -> dict[datetime, FragmentationPoint]:
    """For each moment, the latest stored sample at or before it and at most ``tolerance`` older, in one
    query (one indexed ``LIMIT 1`` lookup per moment); moments with no such sample are left out."""
    if not moments:
        return {}
    latest = [
        Subquery(
            FragmentationSample.objects.filter(taken_at__lte=moment, taken_at__gte=moment - tolerance)
            .order_by("-taken_at")
            .values("pk")[:1]
        )
        for moment in moments
    ]
    rows = FragmentationSample.objects.filter(reduce(or_, (Q(pk=pick) for pick in latest))).values_list(*SAMPLE_FIELDS)
    by_time = {at: (free, fragmented, placeable) for at, free, fragmented, placeable in rows}
    stored = sorted(by_time)
    chosen: dict[datetime, FragmentationPoint] = {}
    for moment in moments:
        index = bisect_right(stored, moment)
        if index and stored[index - 1] >= moment - tolerance:
            free, fragmented, placeable = by_time[stored[index - 1]]
            counts = {int(size): count for size, count in placeable.items()}
            chosen[moment] = FragmentationPoint(moment, free, fragmented, counts)
    return chosen


def first_sample_at() -> datetime | None:
    return FragmentationSample.objects.order_by("taken_at").values_list("taken_at", flat=True).first()


def fragmentation_trend(since: datetime, until: datetime, points: int = 24) -> list[FragmentationPoint]:
    """Fragmentation at ``points`` evenly spaced moments of the window: each from the latest stored
    sample within one step before it; moments before the first sample ever stored are replayed from
    workload placements; later moments with no sample (collection was down) are left out, not invented."""
    moments = trend_moments(since, until, points)
    step = moments[1] - moments[0] if len(moments) > 1 else until - since
    sampled = sampled_fragmentation(moments, tolerance=step)
    first = first_sample_at()
    unsampled = [m for m in moments if m not in sampled and (first is None or m < first)]
    replayed = {p.at: p for p in replayed_fragmentation(unsampled)}
    return [sampled.get(m) or replayed[m] for m in moments if m in sampled or m in replayed]
