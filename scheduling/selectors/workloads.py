"""A researcher's (or a lead's team's) running and pending workloads, each wait explained.

Who owns a workload: ingest maps the orchestrator's names for the submitter (the Slurm user, the Kubernetes
``gpuportal.io/user`` label, service account or namespace, the Ray job submitter) to a portal user by
engine/owners.py and the admins' overrides, and stores that username in ``Workload.user`` ("" when nobody;
the orchestrator's own name stays in ``cluster_user``). So **a workload is a portal user's when
``Workload.user`` equals their username**. A lead's "my team's" view is every active workload of the teams
they lead and the teams below them.

Pool snapshots (``pool_snapshots``) turn the database's current picture into the engine's: nodes with
their free GPUs, each pool's queue in priority order, running work with its expected end (start + time
limit) and GPU indices laid out the way ``selectors.fleet`` lays out allocated GPUs (lowest first), each
team's running GPUs and its burst limit as the cap. A pool's snapshot reads every active workload of the
pool as plain values (not models) and is cached for ``SNAPSHOT_TTL_S`` seconds. The pending rows of one pool
share one backfill pass (``estimate_starts``); figures in docs/performance.md (``benchmarks/my_workloads.py``).
"""

from __future__ import annotations

import json
import uuid
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime

from django.core.cache import cache
from django.db.models import Q, QuerySet
from django.utils import timezone

from scheduling.engine.explain import WaitExplanation, explain_wait
from scheduling.engine.placement import ClusterState
from scheduling.engine.startplan import PoolSnapshot, StartEstimate, describe_wait, estimate_starts
from scheduling.engine.types import MemberAssignment, Request, RunningWorkload
from scheduling.engine.types import Node as EngineNode
from scheduling.models import Node, Orchestrator, Queue, QuotaGrant, Team, Workload
from scheduling.models.table_reads import note_reads
from scheduling.selectors.access import lead_team_ids
from scheduling.selectors.engine_inputs import ActiveRow, engine_nodes, engine_request, snapshot_running
from scheduling.selectors.entitlements import team_entitlements

CAP_LABEL = "burst"
SNAPSHOT_TTL_S = 20
# Every table a pool snapshot is computed from (tests hold this to the SQL that ``pool_snapshots`` runs).
SNAPSHOT_TABLES = tuple(m._meta.db_table for m in (Workload, Orchestrator, Node, Queue, QuotaGrant, Team))
_unpickled: dict[str, tuple[str, PoolSnapshot]] = {}  # cache key -> (stamp, snapshot), this process's
_start_plans: dict[str, tuple[PoolSnapshot, int, dict[str, StartEstimate]]] = {}  # pool -> (snapshot, depth, plan)


@dataclass(frozen=True)
class WorkloadRow:
    """One active workload as "my workloads" shows it."""

    workload: Workload
    gpus: int
    age_s: float
    position: int | None
    estimated_start: str
    explanation: WaitExplanation | None
    advice: tuple = ()  # cross-fleet next steps (selectors/why_waits.with_advice: engine.wait_advice.WaitAdvice)

    @property
    def asks_for_quota(self) -> bool:
        return self.explanation is not None and self.explanation.asks_for_quota

    @property
    def age(self) -> str:
        if self.age_s < 3600:
            return f"{max(0, round(self.age_s / 60))} min"
        if self.age_s < 2 * 86400:
            return f"{self.age_s / 3600:.1f} h"
        return f"{self.age_s / 86400:.0f} d"


def owned_by(username: str) -> Q:
    """The ownership rule (see the module docstring): ingest mapped the submitter to this portal username."""
    return Q(user=username)


def active_workloads(user, *, scope: str = "mine", search: str = "") -> QuerySet[Workload]:
    """The user's own active workloads, or (``scope="team"``) those of the teams they lead."""
    rows = Workload.objects.filter(state__in=Workload.ACTIVE_STATES).select_related("orchestrator", "team")
    if scope == "team":
        rows = rows.filter(team_id__in=lead_team_ids(user))
    else:
        rows = rows.filter(owned_by(user.get_username()))
    if search:
        rows = rows.filter(Q(external_id__icontains=search) | Q(name__icontains=search))
    return rows.order_by("state", "-submitted_at")


def workload_rows(workloads: QuerySet[Workload], now: datetime | None = None) -> list[WorkloadRow]:
    """Each workload with GPUs, age, and, when pending, its queue position, estimated start and explanation.
    The pending ones of a pool share one backfill pass and one picture of its nodes (``explanations``)."""
    now = now or timezone.now()
    listed = list(workloads)
    pending = [w for w in listed if w.state == Workload.State.PENDING]
    explained = explanations(pending, cached_pool_snapshots(now, {w.orchestrator_id for w in pending}), now)
    epoch = now.timestamp()
    rows = []
    for workload in listed:
        explanation = explained.get(workload.pk)
        estimate = explanation.estimate if explanation else None
        rows.append(WorkloadRow(
            workload, workload.gpus, (now - workload.submitted_at).total_seconds(),
            estimate.position if estimate else None,
            describe_wait(estimate.wait_s(epoch)) if estimate else "",
            explanation,
        ))
    return rows


def explanations(pending: list[Workload], pools: dict[int, PoolSnapshot], now: datetime) -> dict[int, WaitExplanation]:
    """Why each pending workload waits, by pool: one ``estimate_starts`` pass and one node state per pool."""
    epoch = now.timestamp()
    by_pool: dict[int, list[Workload]] = defaultdict(list)
    for workload in pending:
        if workload.orchestrator_id in pools:
            by_pool[workload.orchestrator_id].append(workload)
    found = {}
    for pool_id, workloads in by_pool.items():
        pool = pools[pool_id]
        requests = {w.pk: engine_request(w, w.team.slug if w.team else "") for w in workloads}
        planned = start_plan(pool, list(requests.values()), epoch)
        unplanned = [r for r in requests.values() if r.id not in planned]  # newer than the snapshot
        estimates = {**planned, **estimate_starts(unplanned, pool, epoch)}
        state = ClusterState(pool.nodes)
        for workload in workloads:
            request = requests[workload.pk]
            found[workload.pk] = explain_wait(
                request, pool, now=epoch, raw_reason=workload.pending_reason, cap_label=CAP_LABEL,
                estimate=estimates[request.id], state=state,
            )
    return found


def start_plan(pool: PoolSnapshot, requests: list[Request], epoch: float) -> dict[str, StartEstimate]:
    """Start estimates of the workloads queued in ``pool`` up to the deepest of ``requests``, computed once per
    snapshot in this process and reused while the snapshot is (``SNAPSHOT_TTL_S`` at most); a page asking deeper
    into the queue extends the plan. The snapshot already pictures the pool as it was when it was read, so
    estimates as of a few seconds later would add nothing but a backfill pass per page; each page still shows
    the waits against its own clock. EASY decides each job before it looks at a later one, so a longer plan
    keeps every earlier answer (``estimate_starts``)."""
    index_of = {queued.id: i for i, queued in enumerate(pool.queue)}
    depth = max((index_of[r.id] + 1 for r in requests if r.id in index_of), default=0)
    held = _start_plans.get(pool.orchestrator)
    if held is None or held[0] is not pool or held[1] < depth:
        held = (pool, depth, estimate_starts(pool.queue[:depth], pool, epoch))
        _start_plans[pool.orchestrator] = held
    return held[2]


def cached_pool_snapshots(now: datetime, orchestrator_ids: set[int]) -> dict[int, PoolSnapshot]:
    """``pool_snapshots``, each kept ``SNAPSHOT_TTL_S`` in the cache: a pool's snapshot reads all its active
    work (thousands of rows), and collectors refresh it only every round anyway.

    Each cached snapshot carries a stamp, also cached on its own. A process keeps the snapshots it has
    unpickled (``_unpickled``) and reuses one while the cache still holds its stamp: unpickling a large pool's
    thousands of frozen dataclasses cost more than the rest of a "my workloads" page (a 12-character stamp does
    not).
    A cleared or expired cache entry drops its stamp too, so nothing outlives the cache's own answer."""
    keys = {pk: f"workloads:pool-snapshot:v2:{pk}" for pk in orchestrator_ids}
    stamps = cache.get_many([f"{key}:stamp" for key in keys.values()])
    snapshots: dict[int, PoolSnapshot] = {}
    for pk, key in keys.items():
        held = _unpickled.get(key)
        if held is not None and held[0] == stamps.get(f"{key}:stamp"):
            snapshots[pk] = held[1]
    wanted = {key: pk for pk, key in keys.items() if pk not in snapshots}
    for key, entry in cache.get_many(list(wanted)).items():
        _unpickled[key] = entry
        snapshots[wanted[key]] = entry[1]
    if snapshots:  # served without their SQL: a page stored around them depends on their tables all the same
        note_reads(SNAPSHOT_TABLES)
    missing = pool_snapshots(now, orchestrator_ids - snapshots.keys())
    fresh: dict[str, object] = {}
    for pk, snapshot in missing.items():
        stamp = uuid.uuid4().hex[:12]
        _unpickled[keys[pk]] = (stamp, snapshot)
        fresh[keys[pk]], fresh[f"{keys[pk]}:stamp"] = (stamp, snapshot), stamp
    cache.set_many(fresh, SNAPSHOT_TTL_S)
    return {**snapshots, **missing}


def pool_snapshots(now: datetime, orchestrator_ids: set[int]) -> dict[int, PoolSnapshot]:
    """The engine's picture of each of ``orchestrator_ids``' pools now (see the module docstring)."""
    if not orchestrator_ids:
        return {}
    active = ActiveRow.rows(
        Workload.objects.filter(state__in=Workload.ACTIVE_STATES, orchestrator_id__in=orchestrator_ids)
        .order_by("-priority", "submitted_at", "pk")
    )
    names = dict(Orchestrator.objects.filter(pk__in=orchestrator_ids).values_list("pk", "name"))
    nodes_by_pool: dict[str, list[EngineNode]] = defaultdict(list)
    for node in engine_nodes():
        nodes_by_pool[node.orchestrator].append(node)
    in_use, caps = team_use_and_caps()
    snapshots = {}
    for pool_id, name in names.items():
        mine = [w for w in active if w.orchestrator_id == pool_id]
        nodes = tuple(nodes_by_pool.get(name, ()))
        snapshots[pool_id] = PoolSnapshot(
            name, nodes,
            queue=tuple(engine_request(w, w.team_slug or "") for w in mine if w.state == Workload.State.PENDING),
            running=running_workloads([w for w in mine if w.state == Workload.State.RUNNING], nodes),
            team_in_use=in_use, team_cap=caps,
        )
    return snapshots


def team_use_and_caps() -> tuple[dict[str, float], dict[str, float]]:
    """GPUs each team runs now (fleet-wide) and its fleet cap (``selectors/entitlements``: queues and active
    grants; teams without a cap of their own are uncapped here)."""
    in_use: dict[str, float] = defaultdict(float)
    for slug, gang, per_member in Workload.objects.filter(
        state=Workload.State.RUNNING, team__isnull=False
    ).values_list("team__slug", "gang_size", "gpus_per_member"):
        in_use[slug] += gang * per_member
    caps = {slug: float(e.cap) for slug, e in team_entitlements(timezone.now()).items() if e.cap}
    return dict(in_use), caps


def running_workloads(running: list[ActiveRow], nodes: tuple[EngineNode, ...]) -> tuple[RunningWorkload, ...]:
    """Running work with GPU indices on its nodes, allocated GPUs handed out lowest first in start order.

    A workload whose GPUs cannot be laid out (unknown nodes, more GPUs than the snapshot shows allocated)
    keeps no assignments: backfill then treats it as never ending, which errs toward "unknown".
    """
    allocated = {node.name: node.gpu_allocated for node in nodes}
    cursor: dict[str, int] = defaultdict(int)
    result = []
    for workload in sorted(running, key=lambda w: (w.started_s or w.submitted_s, w.pk)):
        assignments = _lay_out(workload, allocated, cursor)
        result.append(snapshot_running(workload, assignments))
    return tuple(result)


def _lay_out(workload: ActiveRow, allocated: dict[str, int], cursor: dict[str, int]) -> tuple[MemberAssignment, ...]:
    """Members on the workload's nodes: as recorded (the demo keeps ``{"node", "gpus"}`` per member), else
    round-robin over the node names collectors record, taking the next allocated GPUs of each node."""
    recorded = json.loads(workload.nodes_json) if workload.nodes_json else []
    recorded = recorded if isinstance(recorded, list) else []
    if recorded and all(isinstance(item, dict) for item in recorded):
        return tuple(MemberAssignment(i, item["node"], tuple(item["gpus"]))
                     for i, item in enumerate(recorded) if item.get("node") in allocated and item.get("gpus"))
    hosts = [name for name in recorded if isinstance(name, str) and name in allocated]
    if not hosts:
        return ()
    taken = dict(cursor)
    assignments = []
    for member in range(workload.gang_size):
        host = hosts[member % len(hosts)]
        first = taken.get(host, 0)
        if first + workload.gpus_per_member > allocated[host]:
            return ()
        assignments.append(MemberAssignment(member, host, tuple(range(first, first + workload.gpus_per_member))))
        taken[host] = first + workload.gpus_per_member
    cursor.update(taken)
    return tuple(assignments)


def teams_led(user) -> list[Team]:
    return list(Team.objects.filter(pk__in=lead_team_ids(user)).order_by("slug"))
