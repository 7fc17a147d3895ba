"""Persist one collector Snapshot in one transaction; a failure touches nothing but the error fields.

A node missing from a good scrape is marked down, never deleted; a workload that left the queue is
marked completed at the scrape time (orchestrators drop finished work from their live listings).
"""

from collections import defaultdict
from datetime import UTC, datetime

from django.db import transaction
from django.utils import timezone

from scheduling.collectors.snapshot import ObservedNode, ObservedWorkload, Snapshot, WorkloadState
from scheduling.models import CollectorRun, Node, Orchestrator, Team, UsageSample, Workload

from .ledger import record_views
from .metrics import refresh_rollups

WORKLOAD_STATES = {
    WorkloadState.RUNNING: Workload.State.RUNNING,
    WorkloadState.PENDING: Workload.State.PENDING,
    WorkloadState.HELD: Workload.State.PENDING,
    WorkloadState.SUSPENDED: Workload.State.PENDING,
}


def _aware(epoch: float | None, default: datetime) -> datetime:
    return datetime.fromtimestamp(epoch, tz=UTC) if epoch else default


def _node_state(observed: ObservedNode) -> str:
    flags = {f.upper() for f in observed.state_flags} | {observed.state.upper()}
    if flags & {"DOWN", "NOT_RESPONDING", "FAIL", "NOTREADY"}:
        return Node.State.DOWN
    if "DRAIN" in flags or observed.cordoned or not observed.schedulable:
        return Node.State.DRAINING if observed.gpu_allocated else Node.State.DRAINED
    if observed.gpu_allocated == 0:
        return Node.State.IDLE
    return Node.State.ALLOCATED if observed.gpu_allocated >= observed.gpu_total else Node.State.MIXED


@transaction.atomic
def ingest_snapshot(orchestrator: Orchestrator, snapshot: Snapshot, *, duration_ms: int = 0) -> CollectorRun:
    now = snapshot.taken_at
    _upsert_nodes(orchestrator, snapshot.nodes, now)
    record_views(orchestrator, snapshot)  # the ledger keeps each source's own word (Node keeps one owner)
    running, pending = _upsert_workloads(orchestrator, snapshot.workloads, now)
    _record_samples(orchestrator, snapshot, now)
    orchestrator.last_success_at = now
    orchestrator.save(update_fields=["last_success_at"])
    refresh_rollups(now, now)
    return CollectorRun.objects.create(
        orchestrator=orchestrator,
        started_at=now,
        duration_ms=duration_ms,
        ok=True,
        nodes=len(snapshot.nodes),
        gpus_total=snapshot.gpu_total,
        gpus_allocated=snapshot.gpu_allocated,
        workloads_running=running,
        workloads_pending=pending,
        pending_gpus=round(snapshot.pending_gpus),
        error="; ".join(snapshot.errors)[:2000],
    )


NODE_COUNTERS = [
    "gpu_model",
    "gpu_total",
    "gpu_allocated",
    "cpu_total",
    "nvlink_domain",
    "leaf_switch",
    "spine",
    "state",
    "labels",
    "last_seen_at",
]


def _upsert_nodes(orchestrator: Orchestrator, observed: tuple[ObservedNode, ...], now: datetime) -> None:
    """Counters are bulk-updated without history; a new node or a change of owner is saved with history."""
    existing = {n.name: n for n in Node.objects.filter(name__in=[o.name for o in observed])}
    unchanged_owner: list[Node] = []
    for seen in observed:
        node = existing.get(seen.name) or Node(name=seen.name)
        is_new_owner = node.pk is None or node.orchestrator_id != orchestrator.pk
        if node.pk is not None and is_new_owner and _node_state(seen) in (Node.State.DRAINED, Node.State.DRAINING):
            continue  # a node handed over by a rebalance stays listed, drained, by its old owner: not a claim
        node.orchestrator = orchestrator
        node.gpu_model, node.gpu_total = seen.gpu_model or node.gpu_model or "unknown", seen.gpu_total
        node.gpu_allocated = min(seen.gpu_allocated, seen.gpu_total)
        node.cpu_total = seen.cpu_total or node.cpu_total
        node.nvlink_domain = seen.nvlink_domain or node.nvlink_domain or seen.name
        node.leaf_switch, node.spine = seen.leaf_switch or node.leaf_switch, seen.spine or node.spine
        node.state, node.labels, node.last_seen_at = _node_state(seen), dict(seen.labels), now
        if is_new_owner:
            node._change_reason = f"observed in {orchestrator.name}"  # type: ignore[attr-defined]
            node.save()
        else:
            unchanged_owner.append(node)
    Node.objects.bulk_update(unchanged_owner, NODE_COUNTERS, batch_size=1000)
    gone = Node.objects.filter(orchestrator=orchestrator).exclude(name__in=[o.name for o in observed])
    gone.update(state=Node.State.DOWN, gpu_allocated=0)


WORKLOAD_FIELDS = [
    "team",
    "user",
    "name",
    "kind",
    "gang_size",
    "gpus_per_member",
    "state",
    "priority",
    "submitted_at",
    "started_at",
    "finished_at",
    "pending_reason",
    "nodes",
]


def _upsert_workloads(orchestrator: Orchestrator, observed: tuple[ObservedWorkload, ...], now: datetime):
    teams = {t.slug: t for t in Team.objects.all()}
    active = Workload.objects.filter(orchestrator=orchestrator, state__in=Workload.ACTIVE_STATES)
    existing = {w.external_id: w for w in active}
    listed = Workload.objects.filter(orchestrator=orchestrator, external_id__in=[o.external_id for o in observed])
    existing.update((w.external_id, w) for w in listed)
    counts = {Workload.State.RUNNING: 0, Workload.State.PENDING: 0}
    new_rows, changed_rows = [], []
    for item in observed:
        row = existing.pop(item.external_id, None)
        (changed_rows if row else new_rows).append(
            _fill_workload(row or Workload(orchestrator=orchestrator, external_id=item.external_id), item, teams, now)
        )
        counts[WORKLOAD_STATES[item.state]] += 1
    Workload.objects.bulk_create(new_rows, batch_size=1000)
    Workload.objects.bulk_update(changed_rows, WORKLOAD_FIELDS, batch_size=1000)
    finished = [w.pk for w in existing.values() if w.state in Workload.ACTIVE_STATES]
    Workload.objects.filter(pk__in=finished).update(state=Workload.State.COMPLETED, finished_at=now)
    return counts[Workload.State.RUNNING], counts[Workload.State.PENDING]


def _fill_workload(row: Workload, item: ObservedWorkload, teams: dict[str, Team], now: datetime) -> Workload:
    state = WORKLOAD_STATES[item.state]
    row.team, row.user, row.name, row.kind = teams.get(item.team), item.user, item.name[:200], item.kind.value
    row.gang_size, row.gpus_per_member = item.gang_size * item.instances, round(item.gpus_per_member)
    row.state, row.priority = state, item.priority
    row.submitted_at = _aware(item.submitted_at, row.submitted_at or now)
    row.started_at = _aware(item.started_at, row.started_at or now) if state == Workload.State.RUNNING else None
    row.pending_reason = item.pending_reason[:300] if state == Workload.State.PENDING else ""
    row.nodes = [{"node": name, "gpus": []} for name in item.nodes]
    row.finished_at = None
    return row


def _record_samples(orchestrator: Orchestrator, snapshot: Snapshot, now: datetime) -> None:
    interval = 30.0
    if orchestrator.last_success_at:
        interval = max(min((now - orchestrator.last_success_at).total_seconds(), 3600.0), 1.0)
    teams = {t.slug: t for t in Team.objects.all()}
    allocated: dict[str, float] = defaultdict(float)
    pending: dict[str, float] = defaultdict(float)
    for item in snapshot.workloads:
        target = allocated if item.state is WorkloadState.RUNNING else pending
        target[item.team] += item.gpus
    rows = [
        UsageSample(
            taken_at=now,
            interval_s=interval,
            orchestrator=orchestrator,
            team=None,
            gpus_total=snapshot.gpu_total,
            gpus_allocated=snapshot.gpu_allocated,
            gpus_pending=snapshot.pending_gpus,
        )
    ]
    for slug in set(allocated) | set(pending):
        if slug in teams:
            rows.append(
                UsageSample(
                    taken_at=now,
                    interval_s=interval,
                    orchestrator=orchestrator,
                    team=teams[slug],
                    gpus_allocated=allocated[slug],
                    gpus_pending=pending[slug],
                )
            )
    UsageSample.objects.bulk_create(rows)


def record_failure(orchestrator: Orchestrator, error: str, *, duration_ms: int = 0) -> CollectorRun:
    """Mark the source stale with its error; its last good nodes, workloads and samples stay as they were."""
    now = timezone.now()
    Orchestrator.objects.filter(pk=orchestrator.pk).update(last_error=error[:2000], last_error_at=now)
    orchestrator.last_error, orchestrator.last_error_at = error[:2000], now
    return CollectorRun.objects.create(
        orchestrator=orchestrator, started_at=now, duration_ms=duration_ms, ok=False, error=error[:2000]
    )
