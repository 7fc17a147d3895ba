"""Persist one collector Snapshot in one transaction; a failure touches nothing but the error fields.

A node missing from a good scrape is marked down, never deleted; a workload that left the queue is
marked completed at the scrape time (orchestrators drop finished work from their live listings).

A process that runs every round of a source (``manage.py watch_kubernetes``) keeps a ``RoundMemo`` of what the
source's last committed round wrote; its rounds then write only the nodes and workloads that changed instead of
reading every stored row back to compare (the steady round of a 5,000-node, 37,500-workload cluster).
"""

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime

from django.contrib.auth import get_user_model
from django.db import transaction
from django.db.models import Count, Max
from django.utils import timezone
from simple_history.utils import bulk_create_with_history

from scheduling.collectors.conditions import condition_of, is_planned
from scheduling.collectors.snapshot import NodeCondition, ObservedNode, ObservedWorkload, Snapshot, WorkloadState
from scheduling.models import CollectorRun, IdentityOverride, Node, Orchestrator, Team, UsageSample, Workload

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


FULL_ROUND_EVERY = 20
"""A remembered source still compares every stored row this often: a row someone else wrote (an admin's fix,
a re-list by another worker) is corrected within that many rounds."""


@dataclass
class RoundMemo:
    """What a source's last committed round wrote: its observed nodes and workloads by name and id, the time of
    that round, and the team and identity mappings the workloads' rows were derived with."""

    taken_at: datetime | None = None
    context: tuple = ()
    nodes: dict[str, ObservedNode] = field(default_factory=dict)
    workloads: dict[str, ObservedWorkload] = field(default_factory=dict)
    rounds_since_full: int = 0

    def usable(self, orchestrator: Orchestrator, context: tuple) -> bool:
        """True when the stored rows are exactly what this memo remembers: the round it remembers was the
        source's last committed one (a rolled-back round, or one by another process, changed that), with the
        same mappings, and no full comparison is due."""
        return (
            self.taken_at is not None
            and orchestrator.last_success_at == self.taken_at
            and self.context == context
            and self.rounds_since_full < FULL_ROUND_EVERY
        )

    def changed_nodes(self, observed: tuple[ObservedNode, ...]) -> list[ObservedNode]:
        return [node for node in observed if self.nodes.get(node.name) != node]

    def changed_workloads(self, observed: tuple[ObservedWorkload, ...]) -> list[ObservedWorkload]:
        last = self.workloads
        # The collector's own memo hands back the very same object for an unchanged gang: `is` settles most.
        return [item for item in observed if (was := last.get(item.external_id)) is not item and was != item]

    def remember(self, snapshot: Snapshot, context: tuple, full: bool) -> None:
        self.taken_at, self.context = snapshot.taken_at, context
        self.nodes = {node.name: node for node in snapshot.nodes}
        self.workloads = {item.external_id: item for item in snapshot.workloads}
        self.rounds_since_full = 0 if full else self.rounds_since_full + 1


_memos: dict[int, RoundMemo] = {}


def remember_rounds(orchestrator: Orchestrator) -> None:
    """This process runs every round of ``orchestrator`` from now on (the watcher): keep a memo of each."""
    _memos.setdefault(orchestrator.pk, RoundMemo())


def forget_rounds(orchestrator: Orchestrator) -> None:
    _memos.pop(orchestrator.pk, None)


def _mapping_context(team_ids: dict[str, int]) -> tuple:
    """What a workload's stored row is derived with besides the workload itself: the team ids and who owns
    which submitter name (identity overrides; the portal's users, by count and newest id)."""
    users = get_user_model().objects.aggregate(count=Count("pk"), newest=Max("pk"))
    overrides = IdentityOverride.objects.order_by("pk").values_list("pk", "kind", "name", "user_id", "orchestrator_id")
    return tuple(sorted(team_ids.items())), tuple(overrides), users["count"], users["newest"]


@transaction.atomic
def ingest_snapshot(orchestrator: Orchestrator, snapshot: Snapshot, *, duration_ms: int = 0) -> CollectorRun:
    now = snapshot.taken_at
    team_ids = dict(Team.objects.values_list("slug", "pk"))
    memo = _memos.get(orchestrator.pk)
    context = (orchestrator.node_domain, _mapping_context(team_ids)) if memo is not None else ()
    delta = memo if memo is not None and memo.usable(orchestrator, context) else None
    if delta is None:
        _upsert_nodes(orchestrator, snapshot.nodes, now)
    else:
        _upsert_nodes(orchestrator, tuple(delta.changed_nodes(snapshot.nodes)), now, listed=snapshot.nodes)
    record_views(orchestrator, snapshot)  # the ledger keeps each source's own word (Node keeps one owner)
    if delta is None:
        running, pending = _upsert_workloads(orchestrator, snapshot.workloads, now, team_ids)
    else:
        running, pending = _upsert_changed_workloads(orchestrator, snapshot.workloads, now, team_ids, delta)
    if memo is not None:
        memo.remember(snapshot, context, full=delta is None)
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


def _upsert_nodes(
    orchestrator: Orchestrator,
    observed: tuple[ObservedNode, ...],
    now: datetime,
    listed: tuple[ObservedNode, ...] | None = None,
) -> None:
    """A new node is created with history, a change of owner saved with history; counters that changed
    are written in bulk without history, and ``last_seen_at`` of the rest set in one update. ``listed``: every
    node the source lists when ``observed`` is only those that changed since its last round (the rest are
    seen again, unchanged).

    Names are matched within the orchestrator's ``node_domain`` only: there a known name under a new owner is
    the same machine moved (its row, history and pinning kept); in another domain it is another machine."""
    names = [o.name for o in observed]
    domain = orchestrator.node_domain
    in_domain = Node.objects.filter(domain=domain)
    if listed is not None:
        changed_names = set(names)
        again = [node.name for node in listed if node.name not in changed_names]
        for chunk in chunks(again):
            in_domain.filter(orchestrator=orchestrator, name__in=chunk).update(last_seen_at=now)
    existing = {n.name: n for chunk in chunks(names) for n in in_domain.filter(name__in=chunk)}
    new_nodes: list[Node] = []
    changed: list[Node] = []
    unchanged: list[int] = []
    for seen in observed:
        node = existing.get(seen.name) or Node(name=seen.name, domain=domain)
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
    # Also the rows of a domain the orchestrator was moved out of: its machines are listed under the new one now.
    all_names = names if listed is None else [node.name for node in listed]
    gone = Node.objects.filter(orchestrator=orchestrator).exclude(domain=domain, name__in=all_names)
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


WORKLOAD_ROW = ["pk", "external_id", *WORKLOAD_COLUMNS]


def _upsert_workloads(
    orchestrator: Orchestrator, observed: tuple[ObservedWorkload, ...], now: datetime, team_ids: dict[str, int]
) -> tuple[int, int]:
    """New workloads are created, changed ones written in bulk, unchanged ones left alone (in a steady
    cluster nearly all of them); the active ones no longer listed are marked completed. Stored rows are
    read as plain tuples: building 40,000 model instances per round only to compare them costs seconds."""
    active = Workload.objects.filter(orchestrator=orchestrator, state__in=Workload.ACTIVE_STATES)
    existing = {row[1]: row for row in active.values_list(*WORKLOAD_ROW)}
    unseen = [o.external_id for o in observed if o.external_id not in existing]
    existing.update(_stored_rows(orchestrator, unseen))  # listed again after they were marked finished
    _write_workloads(orchestrator, observed, existing, now, team_ids)
    _close_unlisted(existing.values(), now)
    return _counts(observed)


def _upsert_changed_workloads(
    orchestrator: Orchestrator,
    observed: tuple[ObservedWorkload, ...],
    now: datetime,
    team_ids: dict[str, int],
    memo: RoundMemo,
) -> tuple[int, int]:
    """As ``_upsert_workloads``, reading back only the rows of the workloads that changed since the round
    ``memo`` remembers, and of those it listed that are no longer listed (closed)."""
    changed = memo.changed_workloads(observed)
    listed = {item.external_id for item in observed}
    gone = [external_id for external_id in memo.workloads if external_id not in listed]
    existing = _stored_rows(orchestrator, [*(item.external_id for item in changed), *gone])
    _write_workloads(orchestrator, changed, existing, now, team_ids)
    _close_unlisted(existing.values(), now)
    return _counts(observed)


def _stored_rows(orchestrator: Orchestrator, external_ids: list[str]) -> dict[str, tuple]:
    rows: dict[str, tuple] = {}
    for chunk in chunks(external_ids):
        stored = Workload.objects.filter(orchestrator=orchestrator, external_id__in=chunk)
        rows.update((row[1], row) for row in stored.values_list(*WORKLOAD_ROW))
    return rows


def _write_workloads(
    orchestrator: Orchestrator,
    items: Iterable[ObservedWorkload],
    existing: dict[str, tuple],
    now: datetime,
    team_ids: dict[str, int],
) -> None:
    """Create or rewrite the rows of ``items`` that differ from ``existing`` (external id -> stored row), taking
    each compared row out of ``existing``: what is left there was not listed."""
    items = list(items)
    owners = identity.owner_map(claim for item in items for claim in item.claims)
    new_rows, changed_rows = [], []
    for item in items:
        row = existing.pop(item.external_id, None)
        stored = dict(zip(WORKLOAD_COLUMNS, row[2:], strict=True)) if row else {}
        values = _workload_values(item, team_ids, stored, now)
        values["user"] = owners.owner(item.claims, orchestrator.name).username
        if row is None:
            new_rows.append(Workload(orchestrator=orchestrator, external_id=item.external_id, **values))
        elif values != stored:
            changed_rows.append(Workload(pk=row[0], orchestrator=orchestrator, external_id=item.external_id, **values))
    Workload.objects.bulk_create(new_rows, batch_size=1000)
    write_rows(Workload, changed_rows, WORKLOAD_FIELDS)


def _counts(observed: tuple[ObservedWorkload, ...]) -> tuple[int, int]:
    """Running and pending workloads listed (held and suspended ones wait: pending)."""
    states = [WORKLOAD_STATES[item.state] for item in observed]
    return states.count(Workload.State.RUNNING), states.count(Workload.State.PENDING)


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
