"""The next step for a waiting workload beyond its own pool's reason (``explain.explain_wait``): the causes that
lie across the fleet, each with what will happen or what to do.

``guarantee``  the team holds less than its guarantee while other teams hold GPUs above theirs here: the
               borrowed GPUs are due back (by the reclaim's expected time, when governance has one);
``elsewhere``  another orchestrator's pool could start it now, within the team's cap there: the route;
``reshape``    the pool is fragmented, and the same GPUs in another shape (members x GPUs per member) fit now.

Pure: pools, nodes and figures in, frozen advice out (no clock: times are the caller's epoch seconds).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from scheduling.engine.placement import ClusterState
from scheduling.engine.startplan import PoolSnapshot
from scheduling.engine.types import Placement, Request
from scheduling.wording import plural


@dataclass(frozen=True, slots=True)
class Borrower:
    """A team holding GPUs above its guarantee in one pool (``gpus``: how many of those it holds there)."""

    team: str
    gpus: float


@dataclass(frozen=True, slots=True)
class WaitAdvice:
    """One next step for a waiting workload, said as a sentence, with the figure a page or API may use."""

    code: str  # guarantee | elsewhere | reshape
    message: str
    orchestrator: str = ""  # elsewhere: the pool that would start it now
    reclaim_at: float | None = None  # guarantee: when the borrowed GPUs are expected back (None: not scheduled)
    shapes: tuple[tuple[int, int], ...] = ()  # reshape: (members, GPUs per member) that fit now


def guarantee_advice(
    *, guaranteed: float, held: float, borrowers: Sequence[Borrower], reclaim_at: float | None, reclaim_label: str = ""
) -> WaitAdvice | None:
    """Under its guarantee, with GPUs borrowed by others in this pool: who holds them and when they come back
    (``reclaim_label``: ``reclaim_at`` as the reader's clock says it, e.g. "14:05 UTC")."""
    short = guaranteed - held
    lent = sum(b.gpus for b in borrowers)
    if short <= 0 or lent <= 0:
        return None
    names = ", ".join(f"{b.team} ({b.gpus:g})" for b in sorted(borrowers, key=lambda b: (-b.gpus, b.team))[:3])
    when = f"reclaim expected by {reclaim_label}" if reclaim_at is not None else "no reclaim is scheduled yet"
    message = (
        f"your team holds {held:g} of its {guaranteed:g} guaranteed GPUs while {lent:g} here are borrowed by "
        f"{names}; {when}"
    )
    return WaitAdvice("guarantee", message, reclaim_at=reclaim_at)


def free_elsewhere(request: Request, pools: Mapping[str, PoolSnapshot], here: str) -> WaitAdvice | None:
    """The first other pool (by name) where ``request`` places now and the team's cap there leaves room."""
    for name in sorted(pools):
        pool = pools[name]
        if name == here:
            continue
        cap = pool.team_cap.get(request.team)
        if cap is not None and pool.team_in_use.get(request.team, 0.0) + request.gpus > cap:
            continue
        if isinstance(ClusterState(pool.nodes).place(request), Placement):
            free = plural(request.gpus, "GPU")
            message = f"{name} could start it now ({free} free there in this shape): submit it there"
            return WaitAdvice("elsewhere", message, orchestrator=name)
    return None


def fitting_shapes(request: Request, state: ClusterState, limit: int = 3) -> WaitAdvice | None:
    """Other shapes of the same whole GPUs (fewer GPUs per member, more members) that place now."""
    if request.gpu_milli or request.gpus_per_member <= 1:
        return None
    total = request.members * request.gpus_per_member
    found: list[tuple[int, int]] = []
    for per_member in range(request.gpus_per_member - 1, 0, -1):
        if total % per_member:
            continue
        shape = replace(request, members=total // per_member, gpus_per_member=per_member)
        if isinstance(state.place(shape), Placement):
            found.append((total // per_member, per_member))
            if len(found) == limit:
                break
    if not found:
        return None
    listed = " or ".join(f"{m} × {g} GPUs" for m, g in found)
    return WaitAdvice("reshape", f"the same {total} GPUs as {listed} would fit now", shapes=tuple(found))
