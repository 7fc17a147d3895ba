"""The one ORM -> engine translation: every engine input read from stored rows (a node, a running workload, a
pending request) is built here, so no two pages read one row two ways (tests/architecture/
test_one_translation.py holds every other module to it; the engine, simulator, traces, collectors and demo
build their own from what they read).

One rule each:

* **Workload kind** (``workload_kind``): a stored kind the engine does not know (empty, or written by hand)
  reads as batch, the model's and the engine's default; one odd row must not take down a pool's snapshot.
  Kinds a user types are checked where they are typed (``described_request``, the API's serializer).
* **Expected end** (``expected_end``): start + time limit when both are known, else None ("unknown": never,
  to backfill; ``UNKNOWN_REMAINING_S`` to the rebalancer). A running workload without a recorded start is
  not over.
* **Node** (``engine_node``): allocated GPUs are its lowest indices; ``Node.UNSCHEDULABLE`` takes it out of
  placement; its pool is its orchestrator's name, except in the what-if replay (``simulated_nodes``), which
  names pools by kind as the recorded jobs and rules it replays do.

What differs between callers is what each engine needs, said at each builder: the reclaim engine needs
distinct GPU indices and the stop handle, the rebalancer whether a drain may break a gang, a pool snapshot
the workload's pk (its queue is keyed by it) and GPUs laid out by ``selectors.workloads``.
"""

from __future__ import annotations

from dataclasses import replace
from typing import NamedTuple

from django.db.models import Case, CharField, F, QuerySet, TextField, Value, When
from django.db.models.functions import Cast, Concat

from scheduling.engine.types import (
    MILLI_PER_GPU,
    MemberAssignment,
    Request,
    RunningWorkload,
    TopologyLevel,
    WorkloadKind,
)
from scheduling.engine.types import Node as EngineNode
from scheduling.models import Node, Workload, node_key, split_node_key
from scheduling.models.fleet import KEY_SEPARATOR
from scheduling.selectors.db_time import EpochSeconds

KINDS = {kind.value: kind for kind in WorkloadKind}


def workload_kind(value: str) -> WorkloadKind:
    """A stored workload kind as the engine's (see the module docstring): unknown reads as batch."""
    return KINDS.get(value, WorkloadKind.BATCH)


def expected_end(started: float | None, estimate_s: float) -> float | None:
    """When running work should end: its start + time limit, None unless both are known."""
    return started + estimate_s if started and estimate_s else None


# --- nodes -----------------------------------------------------------------------------------------------

_NODE_FIELDS = ("name", "gpu_total", "gpu_model", "gpu_allocated", "nvlink_domain", "leaf_switch", "spine")


def node_key_column() -> Case:
    """``Node.key`` computed by the database: the name, ``name@domain`` outside the shared domain."""
    qualified = Concat(F("name"), Value(KEY_SEPARATOR), F("domain"), output_field=CharField())
    return Case(When(domain="", then=F("name")), default=qualified, output_field=CharField())


def node_rows(
    nodes=None, *, with_pk: bool = False, pool: str = "orchestrator__name", qualified: bool = True
) -> list[tuple]:
    """The rows ``engine_node`` reads: every node by topology, or the ``nodes`` queryset in its own order;
    ``pool`` is the column that names the node's pool. A node is named by its key (``Node.key``: names repeat
    across hardware domains), or with ``qualified=False`` by its bare name, for one orchestrator's own nodes
    (what its cluster and its workloads' placements call them)."""
    if nodes is None:
        nodes = Node.objects.order_by("leaf_switch", "nvlink_domain", "name", "domain")
    if qualified:
        nodes = nodes.annotate(node_key=node_key_column())
    fields = ("pk",) * with_pk + ("node_key" if qualified else "name", *_NODE_FIELDS[1:], pool, "pinned", "state")
    return list(nodes.values_list(*fields))


def engine_node(row: tuple, allocated: int | None = None, *, in_plan: bool = False) -> EngineNode:
    """A node (a ``node_rows`` row) as the engine sees it; ``in_plan``: the node is in an open rebalance plan, so the
    rebalancer may not move it again (its state says whether it takes work)."""
    name, total, model, alloc, nvlink, leaf, spine, orch, pinned, state = row
    used = min(total, alloc if allocated is None else allocated)
    domain = split_node_key(name)[0]  # the topology names of separate sites repeat like their node names
    return EngineNode(
        name=name,
        gpu_total=total,
        gpu_model=model,
        gpu_free_milli=(0,) * used + (MILLI_PER_GPU,) * (total - used),
        nvlink_domain=node_key(domain, nvlink) if nvlink else "",
        leaf_switch=node_key(domain, leaf) if leaf else "",
        spine=node_key(domain, spine) if spine else "",
        orchestrator=orch,
        pinned=pinned or in_plan,
        schedulable=state not in Node.UNSCHEDULABLE,
    )


def engine_nodes(nodes=None, *, unmovable: frozenset[int] = frozenset()) -> tuple[EngineNode, ...]:
    """The fleet (or the ``nodes`` queryset, in its own order) as the engine sees it; a node's allocated GPUs
    are its lowest indices, and the pks in ``unmovable`` (nodes already in an open plan) are held where they are
    (pinned: not moved twice) while still counted in their pool: until its drain starts, such a node serves and
    its orchestrator owns it (the overview counts it; the rebalancer once dropped it, and the pages disagreed)."""
    return tuple(engine_node(row[1:], in_plan=row[0] in unmovable) for row in node_rows(nodes, with_pk=True))


def simulated_nodes() -> list[EngineNode]:
    """The fleet as the what-if replay starts it: every node that is not down, empty, all taking work (a drained
    node comes back within the weeks replayed) and unpinned, its pool named by orchestrator kind like the
    recorded jobs (``recorded_request``) and pool rules the replay reads; a node without an NVLink domain is its
    own (a scenario's added nodes copy a template node and keep free GPUs implicit: ``gpu_free_milli=()``)."""
    rows = node_rows(Node.objects.serving().order_by("name"), pool="orchestrator__kind")
    return [
        replace(engine_node(row), gpu_free_milli=(), nvlink_domain=row[4] or row[0], pinned=False, schedulable=True)
        for row in rows
    ]


def added_node(gpu_model: str, gpu_total: int) -> EngineNode:
    """A node a what-if scenario adds of a model the fleet has none of (its name and place set by the caller)."""
    return EngineNode(name="", gpu_total=gpu_total, gpu_model=gpu_model)


# --- running work ----------------------------------------------------------------------------------------


def reclaim_running(row: Workload, taken: dict[str, set[int]], handle: str) -> RunningWorkload:
    """Running work as the reclaim engine reads it: its GPUs on a node keep the indices the scheduler reported,
    else the node's next free ones (``taken`` holds those handed out), so two workloads never share a GPU in the
    model; work without a team or a ``handle`` (what the orchestrator's lever stops it by) is never a victim."""
    parts = [part for part in row.nodes or () if isinstance(part, dict) and part.get("node")]
    share, extra = divmod(row.gpus, max(1, len(parts)))
    assignments = []
    for i, part in enumerate(parts):
        name = str(part["node"])
        wanted = share + (1 if i < extra else 0)
        gpus = [int(g) for g in part.get("gpus") or ()] or _next_free(taken[name], wanted)
        taken[name].update(gpus)
        assignments.append(MemberAssignment(i, name, tuple(gpus)))
    started = row.started_at.timestamp() if row.started_at else 0.0
    team = row.team.slug if row.team else ""
    return RunningWorkload(row.external_id, team, float(row.gpus), tuple(assignments), priority=row.priority,
                           started_at=started, gang_id=handle or row.external_id, preemptible=bool(team and handle))


def _next_free(used: set[int], count: int) -> list[int]:
    found: list[int] = []
    index = 0
    while len(found) < count:
        if index not in used:
            found.append(index)
        index += 1
    return found


def rebalance_running(row: Workload, breakable: bool, domain: str = "") -> RunningWorkload:
    """Running work as the rebalancer reads it: a single-member workload may always be drained, a gang only
    where ``breakable`` (its orchestrator lets a drain break one); its hosts are named by key in ``domain``
    (its orchestrator's ``node_domain``), as ``node_rows`` names the fleet's."""
    assignments = tuple(
        MemberAssignment(
            i, node_key(domain, str(a.get("node", ""))), tuple(a.get("gpus") or range(row.gpus_per_member))
        )
        for i, a in enumerate(row.nodes or ())
        if isinstance(a, dict)
    )
    started = row.started_at.timestamp() if row.started_at else None
    return RunningWorkload(
        id=row.external_id,
        team="",
        gpus=float(row.gang_size * row.gpus_per_member),
        assignments=assignments,
        priority=row.priority,
        started_at=started or 0.0,
        gang_id=row.external_id,
        preemptible=row.gang_size <= 1 or breakable,
        kind=workload_kind(row.kind),
        expected_end=expected_end(started, row.duration_estimate_s),
    )


class ActiveRow(NamedTuple):
    """An active workload as a pool snapshot reads it: a row of values, not a model (a pool holds thousands).
    Times are epoch seconds computed by the database and ``nodes_json`` is the column's JSON text, decoded only
    for running work: parsing thousands of datetimes and JSON values in Python was most of a cold page."""

    pk: int
    orchestrator_id: int
    state: str
    team_slug: str | None
    gang_size: int
    gpus_per_member: int
    priority: int
    kind: str
    duration_estimate_s: int
    submitted_s: float
    started_s: float | None
    nodes_json: str | None

    @property
    def gpus(self) -> int:
        return self.gang_size * self.gpus_per_member

    @classmethod
    def rows(cls, queryset: QuerySet) -> list[ActiveRow]:
        annotated = queryset.annotate(
            submitted_s=EpochSeconds("submitted_at"), started_s=EpochSeconds("started_at"),
            nodes_json=Cast("nodes", TextField()),
        )
        names = ("team__slug" if name == "team_slug" else name for name in cls._fields)
        return [cls(*row) for row in annotated.values_list(*names)]


def snapshot_running(row: ActiveRow, assignments: tuple[MemberAssignment, ...]) -> RunningWorkload:
    """Running work in a pool snapshot, keyed by pk like its queue, its GPUs as ``selectors.workloads`` laid
    them out."""
    return RunningWorkload(
        str(row.pk), row.team_slug or "", float(row.gpus), assignments,
        priority=row.priority, expected_end=expected_end(row.started_s, row.duration_estimate_s),
    )


# --- pending requests ------------------------------------------------------------------------------------


def engine_request(workload: Workload | ActiveRow, team: str) -> Request:
    """A pending workload in a pool snapshot's queue (or a page's question about it), keyed by pk."""
    submitted = workload.submitted_s if isinstance(workload, ActiveRow) else workload.submitted_at.timestamp()
    return Request(
        str(workload.pk), members=workload.gang_size, gpus_per_member=workload.gpus_per_member,
        team=team, priority=workload.priority,
        kind=workload_kind(workload.kind), duration_estimate_s=float(workload.duration_estimate_s),
        submitted_at=submitted,
    )


def reclaim_request(row: Workload) -> Request:
    """A pending workload as the reclaim engine reads it: whose guarantee it waits under, since when."""
    return Request(row.external_id, members=max(1, row.gang_size), gpus_per_member=row.gpus_per_member,
                   team=row.team.slug if row.team else "", priority=row.priority,
                   submitted_at=row.submitted_at.timestamp())


def recorded_request(workload: Workload, *, submit_s: float, duration_s: float, team: str,
                     orchestrator: str) -> Request:
    """Recorded work as the what-if replays it (``selectors.planning``): named orchestrator:external id, a gang
    kept within a leaf switch, its pool by orchestrator kind (``orchestrator``, "" for a kind the replay has no
    pool of)."""
    return Request(
        id=f"{workload.orchestrator.name}:{workload.external_id}",
        members=workload.gang_size,
        gpus_per_member=workload.gpus_per_member,
        topology=TopologyLevel.LEAF_SWITCH if workload.gang_size > 1 else TopologyLevel.ANY,
        team=team,
        priority=workload.priority,
        kind=workload_kind(workload.kind),
        duration_estimate_s=duration_s,
        submitted_at=submit_s,
        orchestrator=orchestrator,
    )


def described_request(*, members: int, gpus_per_member: int, team: str, kind: str, duration_s: float,
                      orchestrator: str, latency_sla_ms: float | None) -> Request:
    """A submission the router is asked about (``selectors.routing``): typed by a user, so a kind the engine
    does not know is refused by name, not read as batch."""
    if kind not in KINDS:
        raise ValueError(f"kind: {kind!r} is not one of {', '.join(KINDS)}")
    return Request(
        "route", members=members, gpus_per_member=gpus_per_member, team=team, kind=KINDS[kind],
        duration_estimate_s=duration_s, orchestrator=orchestrator, latency_sla_ms=latency_sla_ms,
    )
