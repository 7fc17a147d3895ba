"""What allocated GPUs actually do: DCGM busy time from a Prometheus source, attributed and stored.

One round of a ``prometheus`` source (called by ``collection.scrape``, so Celery runs it on the same
schedule as the schedulers):

1. pick the scheduler ``UsageSample`` rows still without ``gpus_busy`` (the work left is in the
   database, not in a worker), and the step grid covering their intervals plus an idle look-back;
2. read every GPU's busy fraction on that grid (:class:`PrometheusCollector`);
3. attribute each GPU-step to the workload holding that GPU (:func:`attribute`);
4. write ``gpus_busy`` into those very samples, next to ``gpus_allocated``, rebuild their rollups,
   and add the window to each workload's :class:`WorkloadUtilisation`.

Attribution, in order of certainty: the exporter's job label (``hpc_job``, or ``namespace``/``pod``)
naming a workload on that node; the GPU indices the scheduler reported (``Workload.nodes[*].gpus``);
else per node, proportionally: the m GPUs a node's workloads hold are taken to be its m busiest (a GPU
nobody holds should be idle), and their busy time is split by each workload's GPU count. Busy time on
GPUs beyond that, or on hosts no orchestrator owns, is *unattributed* and reported as such.

Idle-allocated time: a workload's GPU under ``GPUPORTAL_IDLE_THRESHOLD_PCT`` (5 %) busy for longer than
``GPUPORTAL_IDLE_GRACE_S`` counts, the whole idle run, from the step at which the run passes the grace
period. The grid reaches back one grace period (plus a step) before the window, so a run that began in
the previous round is judged the same as if it were read in one piece, and counted exactly once.
"""

from __future__ import annotations

import math
import time
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import numpy as np
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from scheduling.collectors.prometheus import DcgmWindow, GpuSeries
from scheduling.collectors.reliability import CircuitBreaker
from scheduling.models import CollectorRun, Node, Orchestrator, UsageSample, Workload, WorkloadUtilisation

from .metrics import refresh_rollups
from .orchestrators import build_prometheus_collector, covered_names, masked, metrics_window


def idle_threshold() -> float:
    return float(getattr(settings, "GPUPORTAL_IDLE_THRESHOLD_PCT", 5.0)) / 100.0


def idle_grace_s() -> float:
    return float(getattr(settings, "GPUPORTAL_IDLE_GRACE_S", 300.0))


# --------------------------------------------------------------------------------------------------
# Pure attribution: plain data in, arrays out (no ORM, so it is tested and benchmarked on its own).
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Holding:
    """One workload's GPUs on one node, active on grid steps ``[first, last)``.

    ``gpus`` are the indices the scheduler reported (empty: it did not say, so per node proportional);
    ``count`` is how many GPUs the workload holds there; ``job_keys`` are the exporter labels naming it.
    """

    workload: int
    node: str
    gpus: tuple[int, ...]
    count: float
    first: int
    last: int
    job_keys: frozenset[str] = frozenset()


@dataclass
class Attribution:
    """Per workload and per node, arrays over the grid (GPUs busy per step, seconds of idle-allocated)."""

    points: int
    busy: dict[int, np.ndarray] = field(default_factory=dict)
    allocated: dict[int, np.ndarray] = field(default_factory=dict)
    idle_s: dict[int, np.ndarray] = field(default_factory=dict)
    seen: dict[int, np.ndarray] = field(default_factory=dict)
    node_busy: dict[str, np.ndarray] = field(default_factory=dict)
    unattributed: dict[str, np.ndarray] = field(default_factory=dict)
    node_seen: dict[str, np.ndarray] = field(default_factory=dict)
    proportional: set[int] = field(default_factory=set)
    by_label: set[int] = field(default_factory=set)

    @staticmethod
    def add(table: dict, key, values: np.ndarray) -> None:
        table[key] = table[key] + values if key in table else values.astype(float)


@dataclass
class _Slots:
    """Idle candidates: one row per (workload, GPU) or (workload, node share), judged together."""

    workloads: list[int] = field(default_factory=list)
    weights: list[float] = field(default_factory=list)
    utils: list[np.ndarray] = field(default_factory=list)

    def add(self, workload: int, weight: float, util: np.ndarray) -> None:
        self.workloads.append(workload)
        self.weights.append(weight)
        self.utils.append(util)


def job_key(job) -> str:
    """The key an exporter series names its job by (matched against :attr:`Holding.job_keys`)."""
    if job.hpc_job:
        return f"slurm:{job.hpc_job}"
    return f"pod:{job.namespace}/{job.pod}" if job.pod else ""


def node_matrix(series: list[GpuSeries], points: int) -> np.ndarray:
    """GPUs × steps of one host; a GPU with several series (its job label changed) merges them."""
    width = max(s.gpu for s in series) + 1
    matrix = np.full((width, points), np.nan)
    for s in series:
        matrix[s.gpu] = np.fmax(matrix[s.gpu], s.values)
    return matrix


def active_mask(holding: Holding, points: int) -> np.ndarray:
    mask = np.zeros(points, dtype=bool)
    mask[max(holding.first, 0) : min(holding.last, points)] = True
    return mask


def label_claims(series: list[GpuSeries], holdings: list[Holding]) -> dict[int, list[tuple[Holding, np.ndarray]]]:
    """GPU index -> (holding, steps) where the exporter's job label names a workload on this node."""
    by_key = {key: h for h in holdings for key in h.job_keys}
    claims: dict[int, list[tuple[Holding, np.ndarray]]] = defaultdict(list)
    for s in series:
        holding = by_key.get(job_key(s.job))
        if holding is not None:
            claims[s.gpu].append((holding, ~np.isnan(s.values)))
    return claims


def attribute_node(
    result: Attribution, slots: _Slots, node: str, series: list[GpuSeries], holdings: list[Holding]
) -> None:
    """Attribute one host's GPU-steps to the holdings on it (label, then index, then proportional)."""
    points = result.points
    matrix = node_matrix(series, points)
    known = ~np.isnan(matrix)
    values = np.where(known, matrix, 0.0)
    claimed = np.zeros_like(known)
    labelled = label_claims(series, holdings)
    for holding in holdings:
        active = active_mask(holding, points)
        claims = [(g, mask & active) for g, pairs in labelled.items() for h, mask in pairs if h is holding]
        if claims:
            result.by_label.add(holding.workload)
        else:
            claims = [(g, active) for g in holding.gpus if g < matrix.shape[0]]
        for gpu, mask in claims:
            _claim_gpu(result, slots, holding.workload, values[gpu], known[gpu], mask)
            claimed[gpu] |= mask
    shared = [h for h in holdings if not h.gpus and h.workload not in result.by_label]
    leftover = _share_node(result, slots, values, known & ~claimed, shared)
    result.add(result.node_busy, node, values.sum(axis=0))
    result.add(result.unattributed, node, leftover)
    result.node_seen[node] = result.node_seen.get(node, np.zeros(points, bool)) | known.any(axis=0)


def _claim_gpu(
    result: Attribution, slots: _Slots, workload: int, util: np.ndarray, known: np.ndarray, mask: np.ndarray
) -> None:
    seen = known & mask
    result.add(result.busy, workload, np.where(seen, util, 0.0))
    result.add(result.allocated, workload, seen.astype(float))
    result.seen[workload] = result.seen.get(workload, np.zeros_like(seen)) | seen
    slots.add(workload, 1.0, np.where(seen, util, np.nan))


def _share_node(
    result: Attribution, slots: _Slots, values: np.ndarray, free: np.ndarray, shared: list[Holding]
) -> np.ndarray:
    """Split the unclaimed GPUs' busy time among ``shared`` holdings; returns what nobody holds."""
    unclaimed_total = np.where(free, values, 0.0).sum(axis=0)
    if not shared:
        return unclaimed_total
    points = result.points
    masks = [active_mask(h, points) for h in shared]
    held = np.sum([np.where(m, h.count, 0.0) for h, m in zip(shared, masks, strict=True)], axis=0)
    available = free.sum(axis=0)
    taken = np.minimum(held, available)
    # The ``taken`` busiest free GPUs are the held ones (fractional: part of the next one).
    ranked = -np.sort(-np.where(free, values, -np.inf), axis=0)
    ranked = np.where(np.isfinite(ranked), ranked, 0.0)
    cumulative = np.vstack([np.zeros(points), np.cumsum(ranked, axis=0)])
    whole = np.floor(taken).astype(int)
    part = taken - whole
    columns = np.arange(points)
    nxt = ranked[np.minimum(whole, ranked.shape[0] - 1), columns]
    held_busy = cumulative[whole, columns] + np.where(whole < ranked.shape[0], part * nxt, 0.0)
    mean_util = np.divide(held_busy, taken, out=np.full(points, np.nan), where=taken > 0)
    for holding, mask in zip(shared, masks, strict=True):
        seen = mask & (available > 0)
        share = np.divide(holding.count, held, out=np.zeros(points), where=held > 0)
        result.add(result.busy, holding.workload, np.where(seen, held_busy * share, 0.0))
        result.add(result.allocated, holding.workload, np.where(seen, holding.count, 0.0))
        result.seen[holding.workload] = result.seen.get(holding.workload, np.zeros(points, bool)) | seen
        result.proportional.add(holding.workload)
        slots.add(holding.workload, holding.count, np.where(seen, mean_util, np.nan))
    return unclaimed_total - held_busy


def idle_seconds(utils: np.ndarray, step: float, threshold: float, grace_s: float) -> np.ndarray:
    """Rows × steps: seconds of idle-allocated time to book at each step (``NaN``: not held or unknown).

    A run of steps under ``threshold`` counts once it is longer than ``grace_s``: at the step where it
    passes the grace period its whole length so far, then one step at a time.
    """
    idle = ~np.isnan(utils) & (np.nan_to_num(utils, nan=1.0) < threshold)
    counts = np.cumsum(idle, axis=1)
    resets = np.maximum.accumulate(np.where(idle, 0, counts), axis=1)
    run = (counts - resets) * step
    crossing = idle & (run > grace_s) & (run - step <= grace_s)
    beyond = idle & (run - step > grace_s)
    return np.where(crossing, run, np.where(beyond, step, 0.0))


def attribute(
    window: DcgmWindow, holdings: Iterable[Holding], threshold: float, grace_s: float, resolve=lambda host: host
) -> Attribution:
    """Attribute every GPU-step of ``window``; ``resolve`` maps an exporter hostname to a node name."""
    result = Attribution(points=window.points)
    by_node: dict[str, list[GpuSeries]] = defaultdict(list)
    for s in window.series:
        by_node[resolve(s.hostname)].append(s)
    on_node: dict[str, list[Holding]] = defaultdict(list)
    for h in holdings:
        on_node[h.node].append(h)
    slots = _Slots()
    for node, series in by_node.items():
        attribute_node(result, slots, node, series, on_node.get(node, []))
    if slots.utils:
        weights = np.asarray(slots.weights)[:, None]
        booked = idle_seconds(np.vstack(slots.utils), window.step, threshold, grace_s) * weights
        for workload, row in zip(slots.workloads, booked, strict=True):
            result.add(result.idle_s, workload, row)
    return result


# --------------------------------------------------------------------------------------------------
# The round: which samples, which grid, which holdings; then persistence.
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Plan:
    """The grid (``start`` + ``points`` × ``step``) and the first step that is not look-back."""

    start: float
    step: float
    points: int
    lookback: int
    samples: tuple[UsageSample, ...]

    def index(self, moment: datetime) -> int:
        """First grid step at or after ``moment``."""
        return max(min(math.ceil((moment.timestamp() - self.start) / self.step - 1e-9), self.points), 0)


def covered_orchestrators(source: Orchestrator) -> list[Orchestrator]:
    """The schedulers whose GPUs this source watches: ``options.orchestrators`` names them, else all."""
    names = covered_names(source)
    rows = Orchestrator.objects.filter(kind__in=Orchestrator.SCHEDULER_KINDS, enabled=True)
    return list(rows.filter(name__in=names) if names else rows)


def plan_window(source: Orchestrator, now: datetime, covered: list[Orchestrator]) -> Plan | None:
    window = metrics_window(source)
    step, lag = window.step_s, window.lag_s
    newest = now - timedelta(seconds=lag)
    oldest = newest - timedelta(seconds=window.catchup_s)
    if source.last_success_at:
        oldest = max(oldest, source.last_success_at - timedelta(seconds=lag + window.margin_s))
    samples = tuple(
        UsageSample.objects.filter(
            orchestrator__in=covered, gpus_busy__isnull=True, taken_at__gt=oldest, taken_at__lte=newest
        ).order_by("taken_at")
    )
    if not samples:
        return None
    first = min(s.taken_at.timestamp() - s.interval_s for s in samples)
    last = max(s.taken_at.timestamp() for s in samples)
    lookback = math.ceil(idle_grace_s() / step) + 1
    start = math.floor(first / step) * step - lookback * step
    points = math.ceil((last - start) / step)
    return Plan(start, step, points, lookback, samples)


def holdings_for(plan: Plan, covered: list[Orchestrator]) -> tuple[list[Holding], dict[int, Workload]]:
    """Every covered workload that held GPUs at some step of the grid, one holding per node."""
    begin = datetime.fromtimestamp(plan.start, tz=UTC)
    end = datetime.fromtimestamp(plan.start + plan.points * plan.step, tz=UTC)
    rows = (
        Workload.objects.filter(orchestrator__in=covered, started_at__isnull=False, started_at__lt=end)
        .exclude(state=Workload.State.PENDING)
        .exclude(finished_at__lte=begin)
        .select_related("orchestrator")
    )
    holdings, workloads = [], {}
    for w in rows:
        places = [p for p in w.nodes or () if isinstance(p, dict) and p.get("node")]
        if not places:
            continue
        workloads[w.pk] = w
        first, last = plan.index(w.started_at), plan.index(w.finished_at) if w.finished_at else plan.points
        keys = _job_keys(w)
        for place in places:
            gpus = tuple(int(g) for g in place.get("gpus") or ())
            count = len(gpus) or w.gpus / len(places)
            holdings.append(Holding(w.pk, place["node"], gpus, count, first, last, keys))
    return holdings, workloads


def _job_keys(workload: Workload) -> frozenset[str]:
    kind = workload.orchestrator.kind
    if kind == Orchestrator.Kind.SLURM:
        return frozenset({f"slurm:{workload.external_id}"})
    if kind == Orchestrator.Kind.KUBERNETES and "/pod/" in workload.external_id:
        namespace, _, pod = workload.external_id.partition("/pod/")
        return frozenset({f"pod:{namespace}/{pod}"})
    return frozenset()


def hostname_resolver(names: Iterable[str]):
    """Exporters report ``Hostname`` as the host calls itself; schedulers may use the short or long name."""
    exact = set(names)
    short = {n.split(".")[0]: n for n in exact}

    def resolve(host: str) -> str:
        return host if host in exact else short.get(host.split(".")[0], host)

    return resolve


@dataclass(frozen=True)
class BusyOutcome:
    """What one round measured (GPU-seconds on the grid after the look-back) and how it attributed it."""

    samples_filled: int
    hosts_seen: int
    gpus_seen: int
    busy_gpu_s: float
    attributed_gpu_s: float
    unattributed_gpu_s: float
    unknown_hosts: tuple[str, ...]
    proportional_workloads: int
    labelled_workloads: int
    window: tuple[datetime, datetime] | None

    def notes(self) -> list[str]:
        notes = []
        if self.proportional_workloads:
            notes.append(
                f"{self.proportional_workloads} workloads attributed per node in proportion to their GPUs "
                "(the scheduler gave no GPU indices)"
            )
        if self.unattributed_gpu_s:
            notes.append(f"{self.unattributed_gpu_s / 3600:.3f} busy GPU-hours unattributed")
        if self.unknown_hosts:
            notes.append("hosts no orchestrator owns: " + ", ".join(self.unknown_hosts[:20]))
        return notes


EMPTY = BusyOutcome(0, 0, 0, 0.0, 0.0, 0.0, (), 0, 0, None)


def measure_busy(source: Orchestrator, collector, now: datetime | None = None) -> BusyOutcome:
    """One round: read the grid the pending samples need, attribute it, store it (one transaction)."""
    now = now or timezone.now()
    covered = covered_orchestrators(source)
    plan = plan_window(source, now, covered)
    if plan is None:
        return EMPTY
    window = collector.gpu_window(plan.start, plan.points, plan.step)
    holdings, workloads = holdings_for(plan, covered)
    nodes = dict(Node.objects.filter(orchestrator__in=covered).values_list("name", "orchestrator_id"))
    result = attribute(window, holdings, idle_threshold(), idle_grace_s(), hostname_resolver(nodes))
    return store(plan, result, workloads, nodes, window)


@transaction.atomic
def store(
    plan: Plan, result: Attribution, workloads: dict[int, Workload], nodes: dict[str, int], window: DcgmWindow
) -> BusyOutcome:
    series = _series_by_row(result, workloads, nodes)
    filled, processed = _fill_samples(plan, series, data_steps(result, nodes))
    _add_utilisation(plan, result, workloads, processed)
    if filled:
        refresh_rollups(min(s.taken_at for s in plan.samples), max(s.taken_at for s in plan.samples))
    return _outcome(plan, result, workloads, nodes, window, filled, processed)


def _series_by_row(result: Attribution, workloads: dict[int, Workload], nodes: dict[str, int]) -> dict:
    """(orchestrator id, team id or None) -> busy GPUs per step; pools count every GPU of their nodes."""
    series: dict[tuple[int, int | None], np.ndarray] = {}
    for workload_id, busy in result.busy.items():
        w = workloads[workload_id]
        if w.team_id is not None:
            key = (w.orchestrator_id, w.team_id)
            series[key] = series.get(key, 0.0) + busy
    for node, busy in result.node_busy.items():
        if node in nodes:
            key = (nodes[node], None)
            series[key] = series.get(key, 0.0) + busy
    return series


def data_steps(result: Attribution, nodes: dict[str, int]) -> dict[int, np.ndarray]:
    """Per orchestrator: the steps at which any of its nodes had a DCGM sample."""
    steps: dict[int, np.ndarray] = {}
    for node, seen in result.node_seen.items():
        if node in nodes:
            steps[nodes[node]] = steps.get(nodes[node], np.zeros(result.points, bool)) | seen
    return steps


def _fill_samples(plan: Plan, series: dict, measured: dict[int, np.ndarray]) -> tuple[int, dict[int, np.ndarray]]:
    """Write ``gpus_busy`` into every pending sample whose orchestrator has data in its interval; a sample
    without any stays "not measured" (NULL), and is looked at again next round while it is recent."""
    cumulative = {k: np.concatenate([[0.0], np.cumsum(v)]) for k, v in series.items()}
    processed: dict[int, np.ndarray] = defaultdict(lambda: np.zeros(plan.points, bool))
    changed = []
    for sample in plan.samples:
        low = plan.index(sample.taken_at - timedelta(seconds=sample.interval_s))
        high = plan.index(sample.taken_at)
        steps = measured.get(sample.orchestrator_id)
        if steps is None or not steps[low:high].any():
            continue
        sums = cumulative.get((sample.orchestrator_id, sample.team_id))
        busy_s = 0.0 if sums is None else (sums[high] - sums[low]) * plan.step
        sample.gpus_busy = busy_s / sample.interval_s if sample.interval_s else 0.0
        changed.append(sample)
        if sample.team_id is None:
            processed[sample.orchestrator_id][low:high] = True
    UsageSample.objects.bulk_update(changed, ["gpus_busy"], batch_size=1000)
    return len(changed), processed


def _add_utilisation(plan: Plan, result: Attribution, workloads: dict[int, Workload], processed: dict) -> None:
    existing = {u.workload_id: u for u in WorkloadUtilisation.objects.filter(workload_id__in=list(result.busy))}
    new, changed = [], []
    step = plan.step
    for workload_id, busy in result.busy.items():
        mask = processed.get(workloads[workload_id].orchestrator_id)
        if mask is None:
            continue
        seen = result.seen[workload_id] & mask
        if not seen.any():
            continue
        row = existing.get(workload_id) or WorkloadUtilisation(workload_id=workload_id)
        row.busy_gpu_s += float(busy[mask].sum()) * step
        row.allocated_gpu_s += float(result.allocated[workload_id][mask].sum()) * step
        idle = result.idle_s.get(workload_id)
        row.idle_allocated_gpu_s += float(idle[mask].sum()) if idle is not None else 0.0
        row.samples += int(seen.sum())
        last = plan.start + (int(np.flatnonzero(seen)[-1]) + 1) * step
        row.last_sample_at = max(filter(None, [row.last_sample_at, datetime.fromtimestamp(last, tz=UTC)]))
        (changed if row.pk else new).append(row)
    WorkloadUtilisation.objects.bulk_create(new, batch_size=1000)
    fields = ["busy_gpu_s", "allocated_gpu_s", "idle_allocated_gpu_s", "samples", "last_sample_at"]
    WorkloadUtilisation.objects.bulk_update(changed, fields, batch_size=1000)


def _outcome(plan, result, workloads, nodes, window, filled, processed) -> BusyOutcome:
    start = plan.lookback
    busy = sum(float(v[start:].sum()) for v in result.node_busy.values()) * plan.step
    attributed = sum(float(v[start:].sum()) for v in result.busy.values()) * plan.step
    unknown = tuple(sorted(n for n in result.node_busy if n not in nodes))
    begin = datetime.fromtimestamp(plan.start + start * plan.step, tz=UTC)
    return BusyOutcome(
        samples_filled=filled,
        hosts_seen=len(result.node_busy),
        gpus_seen=len({(s.hostname, s.gpu) for s in window.series}),
        busy_gpu_s=busy,
        attributed_gpu_s=attributed,
        unattributed_gpu_s=max(busy - attributed, 0.0),
        unknown_hosts=unknown,
        proportional_workloads=len(result.proportional),
        labelled_workloads=len(result.by_label),
        window=(begin, datetime.fromtimestamp(plan.start + plan.points * plan.step, tz=UTC)),
    )


def scrape_busy(source: Orchestrator, breaker: CircuitBreaker, secret: str = "") -> CollectorRun:  # nosec B107 - empty means no auth
    """``collection.scrape`` for a prometheus source: measure, then record the run like any scrape."""
    started = time.perf_counter()
    with build_prometheus_collector(source, breaker, secret) as collector:
        outcome = measure_busy(source, collector)
    now = timezone.now()
    Orchestrator.objects.filter(pk=source.pk).update(last_success_at=now)
    source.last_success_at = now
    return CollectorRun.objects.create(
        orchestrator=source,
        started_at=now,
        duration_ms=round((time.perf_counter() - started) * 1000),
        ok=True,
        nodes=outcome.hosts_seen,
        gpus_total=outcome.gpus_seen,
        error=masked("; ".join(outcome.notes()), source)[:2000],
    )
