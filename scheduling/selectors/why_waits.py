"""Why it waits, across the fleet: beside the pool's own reason (``workloads.explanations``), the causes a
researcher cannot see from one orchestrator, each with its next step (``engine.wait_advice``): under the team's
guarantee while others borrow GPUs in the pool (reclaim expected by HH:MM), free on another orchestrator now (the
route), or fragmented where another shape of the same GPUs fits now.

``reclaim_expected_at`` reads the reclaim plans (issue 31 item 3): until a decided plan claims the borrowed GPUs
for the workload it answers None, and the page says "no reclaim is scheduled yet"."""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.utils import timezone

from scheduling.engine.placement import ClusterState
from scheduling.engine.startplan import PoolSnapshot
from scheduling.engine.wait_advice import Borrower, WaitAdvice, fitting_shapes, free_elsewhere, guarantee_advice
from scheduling.models import Orchestrator, Queue, ReclaimPlan, Team, TeamTree, Workload

from .engine_inputs import engine_request
from .workloads import WorkloadRow, cached_pool_snapshots

NO_ROOM = ("capacity", "fragmented", "topology", "priority")  # waits for GPUs others hold


def reclaim_expected_at(workload: Workload, borrowers: list[Borrower]) -> datetime | None:
    """When the GPUs ``borrowers`` hold in ``workload``'s pool are expected back for it: a reclaim plan that
    claims them for this very workload was approved (or applied, in auto mode) within the last hour, so the
    round after its decision frees them. None: no decided reclaim names it (none planned yet, or a plan still
    waits for an admin: the reclaim page shows those)."""
    if not borrowers:
        return None
    since = timezone.now() - timedelta(hours=1)
    decided = ReclaimPlan.objects.filter(
        orchestrator_id=workload.orchestrator_id,
        state__in=(ReclaimPlan.State.APPROVED, ReclaimPlan.State.APPLIED),
        created_at__gte=since,
    ).order_by("-created_at")
    for plan in decided.only("reclaims", "created_at", "decided_at"):
        if any(claim.get("request_id") == workload.external_id for claim in plan.reclaims):
            return (plan.decided_at or plan.created_at) + timedelta(seconds=settings.GPUPORTAL_ROUND_SECONDS)
    return None


@dataclasses.dataclass(frozen=True)
class _Entitlements:
    tree: TeamTree
    guaranteed: dict[int, int]  # team id -> guaranteed GPUs, all models
    slugs: dict[str, int]

    def guarantor(self, team_id: int) -> int | None:
        """The team whose guarantee covers ``team_id``: itself if it has one, else its nearest ancestor with one."""
        for candidate in (team_id, *self.tree.ancestors(team_id)):
            if self.guaranteed.get(candidate):
                return candidate
        return None

    def held(self, team_id: int, in_use: dict[str, float]) -> float:
        """GPUs the team's subtree runs (``in_use``: by team slug)."""
        return sum(in_use.get(self.tree.teams[t].slug, 0.0) for t in self.tree.subtree(team_id))


def _entitlements() -> _Entitlements:
    tree = TeamTree.of(Team.objects.only("pk", "slug", "parent_id"))
    guaranteed: dict[int, int] = defaultdict(int)
    for team_id, gpus in Queue.objects.filter(guaranteed__gt=0).values_list("team_id", "guaranteed"):
        guaranteed[team_id] += gpus
    return _Entitlements(tree, dict(guaranteed), {t.slug: pk for pk, t in tree.teams.items()})


def with_advice(rows: list[WorkloadRow], now: datetime) -> list[WorkloadRow]:
    """``rows`` with each pending one's cross-fleet advice (guarantee, elsewhere, reshape), in that order."""
    pending = [r for r in rows if r.workload.state == Workload.State.PENDING and r.workload.team_id]
    if not pending:
        return rows
    ids = set(Orchestrator.objects.filter(enabled=True).values_list("pk", flat=True))
    pools = cached_pool_snapshots(now, ids)
    by_name = {pool.orchestrator: pool for pool in pools.values()}
    rights = _entitlements()
    found = {r.workload.pk: _advice(r, pools.get(r.workload.orchestrator_id), by_name, rights) for r in pending}
    return [dataclasses.replace(r, advice=found.get(r.workload.pk, ())) for r in rows]


def _advice(
    row: WorkloadRow, pool: PoolSnapshot | None, pools: dict[str, PoolSnapshot], rights: _Entitlements
) -> tuple[WaitAdvice, ...]:
    if pool is None:
        return ()
    workload = row.workload
    request = engine_request(workload, workload.team.slug)
    code = row.explanation.code if row.explanation is not None else ""
    found = [
        _guarantee(workload, pool, rights) if code in NO_ROOM else None,  # it can start here: nothing to reclaim
        free_elsewhere(request, pools, pool.orchestrator),
    ]
    if code == "fragmented":
        found.append(fitting_shapes(request, ClusterState(pool.nodes)))
    return tuple(a for a in found if a is not None)


def _guarantee(workload: Workload, pool: PoolSnapshot, rights: _Entitlements) -> WaitAdvice | None:
    mine = rights.guarantor(workload.team_id)
    if mine is None:
        return None
    held = rights.held(mine, dict(pool.team_in_use))
    borrowers = _borrowers(pool, rights, mine)
    reclaim = reclaim_expected_at(workload, borrowers)
    return guarantee_advice(
        guaranteed=rights.guaranteed[mine], held=held, borrowers=borrowers,
        reclaim_at=reclaim.timestamp() if reclaim else None,
        reclaim_label=f"{reclaim.astimezone(UTC):%H:%M} UTC" if reclaim else "",
    )  # fmt: skip


def _borrowers(pool: PoolSnapshot, rights: _Entitlements, mine: int) -> list[Borrower]:
    """Top-level teams (not ``mine``'s) holding more than their guarantee fleet-wide, and how many of those GPUs
    they hold in this pool."""
    here: dict[int, float] = defaultdict(float)
    for running in pool.running:
        team_id = rights.slugs.get(running.team)
        if team_id is not None:
            here[_top(rights.tree, team_id)] += running.gpus
    my_top = _top(rights.tree, mine)
    found = []
    for top, gpus_here in here.items():
        above = rights.held(top, dict(pool.team_in_use)) - rights.guaranteed.get(top, 0)
        if top != my_top and above > 0:
            found.append(Borrower(rights.tree.teams[top].slug, min(gpus_here, above)))
    return found


def _top(tree: TeamTree, team_id: int) -> int:
    chain = tree.ancestors(team_id)
    return chain[-1] if chain else team_id
