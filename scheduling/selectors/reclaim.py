"""The reclaim engine's inputs for one orchestrator (its nodes, running and pending work, the guarantees it must
keep) and reclaim plans as pages and the API read them."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime

from django.db.models import Q, Sum

from scheduling.engine.types import MemberAssignment, Request, RunningWorkload
from scheduling.engine.types import Node as EngineNode
from scheduling.models import Node, Orchestrator, Queue, QuotaGrant, ReclaimPlan, Workload
from scheduling.selectors.fleet import engine_node, node_rows


@dataclass(frozen=True)
class ReclaimInputs:
    nodes: tuple[EngineNode, ...]
    running: tuple[RunningWorkload, ...]
    pending: tuple[Request, ...]


def guarantees_by_orchestrator(orchestrators: list[Orchestrator], now: datetime) -> dict[int, dict[str, float]]:
    """Per orchestrator pk, each team's guaranteed GPUs there (team slug -> GPUs).

    TODAY'S COPY, to be replaced by the entitlement split (issue #31, item 1) when it lands: every orchestrator
    is given each team's whole fleet guarantee (its queues' ``guaranteed`` over all GPU models) plus its grants
    in force, fleet-wide or naming that orchestrator. Reclaim only ever acts where a team is below this figure
    *and* others hold GPUs above theirs on the same orchestrator, so a copied guarantee over-asks, never steals
    from a team within its own.
    """
    fleet = {
        slug: float(gpus or 0)
        for slug, gpus in Queue.objects.values_list("team__slug").annotate(gpus=Sum("guaranteed"))
    }
    grants = QuotaGrant.objects.filter(state=QuotaGrant.State.ACTIVE, starts_at__lte=now, ends_at__gt=now)
    result: dict[int, dict[str, float]] = {}
    for orchestrator in orchestrators:
        here = dict(fleet)
        mine = grants.filter(Q(orchestrator__isnull=True) | Q(orchestrator=orchestrator))
        for slug, gpus in mine.values_list("team__slug").annotate(gpus=Sum("gpus")):
            here[slug] = here.get(slug, 0.0) + float(gpus or 0)
        result[orchestrator.pk] = {slug: gpus for slug, gpus in here.items() if gpus > 0}
    return result


def reclaim_inputs(orchestrator: Orchestrator) -> ReclaimInputs:
    """What the last collect round saw of ``orchestrator`` as the engine reads it. A workload's GPUs on a node
    keep the indices the scheduler reported, else the node's next free ones, so two workloads never share a
    GPU in the model; work without a team is never a victim (nobody can say whose guarantee it borrows)."""
    rows = list(
        Workload.objects.filter(orchestrator=orchestrator, state__in=Workload.ACTIVE_STATES)
        .select_related("team")
        .only("external_id", "state", "gang_size", "gpus_per_member", "priority", "submitted_at", "started_at",
              "nodes", "team__slug")
        .order_by("started_at", "external_id")
    )
    taken: dict[str, set[int]] = defaultdict(set)
    running = tuple(_running(row, taken) for row in rows if row.state == Workload.State.RUNNING)
    pending = tuple(_pending(row) for row in rows if row.state == Workload.State.PENDING and row.gpus > 0)
    nodes = tuple(
        engine_node(row, allocated=max(row[3], len(taken.get(row[0], ()))))
        for row in node_rows(Node.objects.filter(orchestrator=orchestrator).order_by("name"))
    )
    return ReclaimInputs(nodes, running, pending)


def _running(row: Workload, taken: dict[str, set[int]]) -> RunningWorkload:
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
                           started_at=started, gang_id=row.external_id, preemptible=bool(team))


def _next_free(used: set[int], count: int) -> list[int]:
    found: list[int] = []
    index = 0
    while len(found) < count:
        if index not in used:
            found.append(index)
        index += 1
    return found


def _pending(row: Workload) -> Request:
    return Request(row.external_id, members=max(1, row.gang_size), gpus_per_member=row.gpus_per_member,
                   team=row.team.slug if row.team else "", priority=row.priority,
                   submitted_at=row.submitted_at.timestamp())


def open_plans(orchestrator: Orchestrator | None = None):
    plans = ReclaimPlan.objects.filter(state__in=(ReclaimPlan.State.PENDING, ReclaimPlan.State.APPROVED))
    return plans.filter(orchestrator=orchestrator) if orchestrator is not None else plans
