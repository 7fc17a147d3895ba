"""Persist one collector Snapshot in one transaction; a failure touches nothing but the error fields.

A node missing from a good scrape is marked down, never deleted; a workload that left the queue is
marked completed at the scrape time (orchestrators drop finished work from their live listings).
"""

from collections import defaultdict
from datetime import UTC, datetime

from django.db import transaction
from django.utils import timezone
from simple_history.utils import bulk_create_with_history

from scheduling.collectors.conditions import condition_of, is_planned
from scheduling.collectors.snapshot import NodeCondition, ObservedNode, ObservedWorkload, Snapshot, WorkloadState
from scheduling.models import CollectorRun, Node, Orchestrator, Team, UsageSample, Workload

from . import identity, job_actions
from .admission_bypass import record_bypasses
from .bulk import chunks, field_values, write_rows
from .ledger import record_views
from .metrics import refresh_rollups
from .orchestrators import masked

WORKLOAD_STATES = {
    WorkloadState.RUNNING: Workload.State.RUNNING,
    WorkloadState.PENDING: Workload.State.PENDING,
    WorkloadState.HELD: Workload.State.PENDING,
    WorkloadState.SUSPENDED: Workload.State.PENDING,
}


def _aware(epoch: float | None, default: datetime) -> datetime:
    return datetime.fromtimestamp(epoch, tz=UTC) if epoch else default


STORED_STATES = {
    NodeCondition.DOWN: Node.State.DOWN,
    NodeCondition.NOT_READY: Node.State.DOWN,
    NodeCondition.DRAINING: Node.State.DRAINING,
    NodeCondition.DRAINED: Node.State.DRAINED,
}


def _node_state(observed: ObservedNode) -> str:
    """The stored state of an observed node: its condition, and for one that takes work (or of unknown
    condition) how many of its GPUs are in use."""
    condition = condition_of(observed)
    if condition in STORED_STATES:
        return STORED_STATES[condition]
    if condition is NodeCondition.UNKNOWN:
        return Node.State.DRAINING if observed.gpu_allocated else Node.State.DRAINED
    if observed.gpu_allocated == 0:
        return Node.State.IDLE
    return Node.State.ALLOCATED if observed.gpu_allocated >= observed.gpu_total else Node.State.MIXED


def _released(observed: ObservedNode) -> bool:
    """Takes no work here but is not down: drained or draining (a rebalance's release looks like this)."""
    state = _node_state(observed)
    return state in Node.UNSCHEDULABLE and state != Node.State.DOWN


@transaction.atomic
def ingest_snapshot(orchestrator: Orchestrator, snapshot: Snapshot, *, duration_ms: int = 0) -> CollectorRun:
    now = snapshot.taken_at
    _upsert_nodes(orchestrator, snapshot.nodes, now)
    record_views(orchestrator, snapshot)  # the ledger keeps each source's own word (Node keeps one owner)
    team_ids = dict(Team.objects.values_list("slug", "pk"))
    running, pending = _upsert_workloads(orchestrator, snapshot.workloads, now, team_ids)
    job_actions.read_back(orchestrator)  # a cancel or hold is confirmed by the cluster's own listing
    record_bypasses(orchestrator, snapshot, team_ids)
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
        error=masked("; ".join(snapshot.errors), orchestrator)[:2000],
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
]


def _upsert_nodes(orchestrator: Orchestrator, observed: tuple[ObservedNode, ...], now: datetime) -> None:
    """A new node is created with history, a change of owner saved with history; counters that changed
    are written in bulk without history, and ``last_seen_at`` of the rest set in one update."""
    names = [o.name for o in observed]
    existing = {n.name: n for chunk in chunks(names) for n in Node.objects.filter(name__in=chunk)}
    new_nodes: list[Node] = []
    changed: list[Node] = []
    unchanged: list[int] = []
    for seen in observed:
        node = existing.get(seen.name) or Node(name=seen.name)
        is_new_owner = node.pk is None or node.orchestrator_id != orchestrator.pk
        if node.pk is not None and is_new_owner and _released(seen):
            continue  # a node handed over by a rebalance stays listed, drained, by its old owner: not a claim
        before = field_values(node, NODE_COUNTERS) if node.pk else None
        _fill_node(node, seen, orchestrator, now)
        if node.pk is None:
            new_nodes.append(node)
        elif is_new_owner:
            node._change_reason = f"observed in {orchestrator.name}"  # type: ignore[attr-defined]
            node.save()
        elif field_values(node, NODE_COUNTERS) != before:
            changed.append(node)
        else:
            unchanged.append(node.pk)
    bulk_create_with_history(new_nodes, Node, batch_size=1000, default_change_reason=f"observed in {orchestrator.name}")
    write_rows(Node, changed, [*NODE_COUNTERS, "last_seen_at"])
    for chunk in chunks(unchanged):
        Node.objects.filter(pk__in=chunk).update(last_seen_at=now)
    gone = Node.objects.filter(orchestrator=orchestrator).exclude(name__in=names)
    gone.update(state=Node.State.DOWN, gpu_allocated=0)


def _fill_node(node: Node, seen: ObservedNode, orchestrator: Orchestrator, now: datetime) -> None:
    node.orchestrator = orchestrator
    node.gpu_model, node.gpu_total = seen.gpu_model or node.gpu_model or "unknown", seen.gpu_total
    node.gpu_allocated = min(seen.gpu_allocated, seen.gpu_total)
    node.cpu_total = seen.cpu_total or node.cpu_total
    node.nvlink_domain = seen.nvlink_domain or node.nvlink_domain or seen.name
    node.leaf_switch, node.spine = seen.leaf_switch or node.leaf_switch, seen.spine or node.spine
    node.state, node.labels, node.last_seen_at = _node_state(seen), dict(seen.labels), now


WORKLOAD_FIELDS = [
    "team",
    "user",
    "cluster_user",
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
    "submission_id",
]
WORKLOAD_COLUMNS = [Workload._meta.get_field(name).attname for name in WORKLOAD_FIELDS]  # team -> team_id


def _upsert_workloads(
    orchestrator: Orchestrator, observed: tuple[ObservedWorkload, ...], now: datetime, team_ids: dict[str, int]
):
    """New workloads are created, changed ones written in bulk, unchanged ones left alone (in a steady
    cluster nearly all of them); the active ones no longer listed are marked completed. Stored rows are
    read as plain tuples: building 40,000 model instances per round only to compare them costs seconds."""
    owners = identity.owner_map(claim for item in observed for claim in item.claims)
    columns = ["pk", "external_id", *WORKLOAD_COLUMNS]
    active = Workload.objects.filter(orchestrator=orchestrator, state__in=Workload.ACTIVE_STATES)
    existing = {row[1]: row for row in active.values_list(*columns)}
    unseen = [o.external_id for o in observed if o.external_id not in existing]
    for chunk in chunks(unseen):  # listed again after they were marked finished
        listed = Workload.objects.filter(orchestrator=orchestrator, external_id__in=chunk)
        existing.update((row[1], row) for row in listed.values_list(*columns))
    counts = {Workload.State.RUNNING: 0, Workload.State.PENDING: 0}
    new_rows, changed_rows = [], []
    for item in observed:
        row = existing.pop(item.external_id, None)
        counts[WORKLOAD_STATES[item.state]] += 1
        stored = dict(zip(WORKLOAD_COLUMNS, row[2:], strict=True)) if row else {}
        values = _workload_values(item, team_ids, stored, now)
        values["user"] = owners.owner(item.claims, orchestrator.name).username
        if row is None:
            new_rows.append(Workload(orchestrator=orchestrator, external_id=item.external_id, **values))
        elif values != stored:
            changed_rows.append(Workload(pk=row[0], orchestrator=orchestrator, external_id=item.external_id, **values))
    Workload.objects.bulk_create(new_rows, batch_size=1000)
    write_rows(Workload, changed_rows, WORKLOAD_FIELDS)
    _close_unlisted(existing.values(), now)
    return counts[Workload.State.RUNNING], counts[Workload.State.PENDING]


def _close_unlisted(rows, now: datetime) -> None:
    """Active work the source no longer lists has ended: running work completed; work that never started
    left the queue unrun (cancelled, or a gang's pending remainder that the running part absorbed), so it
    counts as no finished job and no GPU-hours."""
    state_at = 2 + WORKLOAD_COLUMNS.index("state")
    ended = {Workload.State.RUNNING: Workload.State.COMPLETED, Workload.State.PENDING: Workload.State.CANCELLED}
    for was, becomes in ended.items():
        for chunk in chunks([row[0] for row in rows if row[state_at] == was]):
            Workload.objects.filter(pk__in=chunk).update(state=becomes, finished_at=now)


def _workload_values(item: ObservedWorkload, team_ids: dict[str, int], stored: dict, now: datetime) -> dict:
    """The columns of ``WORKLOAD_COLUMNS`` for ``item``; ``stored`` (the row's current values, if any)
    supplies the times a source stops reporting (a start time Slurm no longer lists)."""
    state = WORKLOAD_STATES[item.state]
    running = state == Workload.State.RUNNING
    return {
        "team_id": team_ids.get(item.team),
        "cluster_user": item.user[:255],
        "name": item.name[:200],
        "kind": item.kind.value,
        "gang_size": item.gang_size * item.instances,
        "gpus_per_member": round(item.gpus_per_member),
        "state": state,
        "priority": item.priority,
        "submitted_at": _aware(item.submitted_at, stored.get("submitted_at") or now),
        "started_at": _aware(item.started_at, stored.get("started_at") or now) if running else None,
        "finished_at": None,
        "pending_reason": item.pending_reason[:300] if state == Workload.State.PENDING else "",
        "nodes": placements(item),
        "submission_id": item.submission_id[:200],
    }


def placements(item: ObservedWorkload) -> list[dict]:
    """``Workload.nodes``: each node with the GPU indices the workload holds there when the scheduler
    says (Slurm's ``gres_detail``; busy-time attribution joins DCGM samples on them), else ``[]``."""
    indices = item.node_gpu_indices if len(item.node_gpu_indices) == len(item.nodes) else ()
    return [{"node": name, "gpus": list(indices[i]) if indices else []} for i, name in enumerate(item.nodes)]


def unusable_gpus(observed: ObservedNode) -> int:
    """Free GPUs of a node that is down, drained or draining: capacity nobody can be given."""
    if _node_state(observed) in Node.UNSCHEDULABLE:
        return max(observed.gpu_total - observed.gpu_allocated, 0)
    return 0


def planned_gpus(observed: ObservedNode) -> int:
    """Free GPUs of a schedulable node the scheduler keeps idle for a pending gang."""
    if is_planned(observed) and not unusable_gpus(observed):
        return max(observed.gpu_total - observed.gpu_allocated, 0)
    return 0


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
            gpus_unavailable=sum(unusable_gpus(n) for n in snapshot.nodes),
            gpus_planned=sum(planned_gpus(n) for n in snapshot.nodes),
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
    error = masked(error, orchestrator)  # before the cut: half a secret would no longer be recognised
    Orchestrator.objects.filter(pk=orchestrator.pk).update(last_error=error[:2000], last_error_at=now)
    orchestrator.last_error, orchestrator.last_error_at = error[:2000], now
    return CollectorRun.objects.create(
        orchestrator=orchestrator, started_at=now, duration_ms=duration_ms, ok=False, error=error[:2000]
    )
