"""Preemption: which running gangs to stop so a request can start, and why each one.

Rules (Kueue's reclaim-within-cohort and priority preemption, KAI's reclaim, Slurm's QOS preemption):

* only *borrowed* capacity is taken from another team: a victim's team must stay at or above its
  guaranteed floor after the plan (guaranteed floors are never preempted);
* a team reclaiming its own entitlement (its usage plus the request stays within
  ``max(guaranteed, allocation)``) may take borrowed capacity whatever the borrower's priority;
  otherwise only strictly lower-priority work is eligible; inside one team, lower priority only;
* whole gangs only; non-preemptible work and work younger than ``min_runtime_s`` are never victims;
* cheapest first: lowest priority, then newest (least work lost). For a single-member request the
  search walks gangs in that order and stops at the first node that has room (so that node's most
  expensive victim is the cheapest possible); when that walk grows long (several victims needed on
  one node), it switches to a node scan that compares the cheapest sufficient victim sets of the first
  ``SCAN_CANDIDATES`` feasible nodes, as kube-scheduler samples candidate nodes. Victims that turn
  out unnecessary are then dropped. Gangs (multi-member requests) use the walk with trial placements.

CPU and memory of victims are not modelled (``RunningWorkload`` carries GPUs only), so a node whose
CPU is exhausted stays unusable even after preemption.

The result is a decision (``VictimPlan`` with a reason per victim, or a ``Rejection``); nothing is
executed here.
"""

from __future__ import annotations

import bisect
import zlib
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from scheduling.engine.placement import ClusterState, Shape
from scheduling.engine.types import (
    MILLI_PER_GPU,
    Entitlement,
    MemberAssignment,
    Node,
    Placement,
    Rejection,
    Request,
    RunningWorkload,
    TopologyLevel,
    Victim,
    VictimPlan,
)
from scheduling.wording import plural


@dataclass(slots=True)
class _Gang:
    """A gang as a victim candidate, with what stopping it frees cached per node."""

    key: str
    team: str
    members: list[str] = field(default_factory=list)
    gpus: float = 0.0
    priority: int = 0
    started_at: float = 0.0
    youngest_start: float = 0.0
    preemptible: bool = True
    parts: dict[str, list[tuple[int, int]]] = field(default_factory=dict)

    def absorb(self, workload: RunningWorkload) -> None:
        self.members.append(workload.id)
        self.gpus += workload.gpus
        self.priority = max(self.priority, workload.priority)
        self.started_at = min(self.started_at, workload.started_at)
        self.youngest_start = max(self.youngest_start, workload.started_at)
        self.preemptible = self.preemptible and workload.preemptible
        for assignment in workload.assignments:
            part = self.parts.setdefault(assignment.node, [])
            part.extend((gpu, assignment.gpu_milli) for gpu in assignment.gpu_indices)

    @property
    def order(self) -> tuple[int, float, str]:
        """Cheapest victim first: lowest priority, then the newest (least work lost)."""
        return (self.priority, -self.started_at, self.key)


class RunningSet:
    """Running workloads indexed for preemption: by id, by gang (in victim order) and per team.

    Build one and keep it in step with ``add`` / ``remove`` so that each decision costs only the
    victims it examines, not a pass over everything running.
    """

    def __init__(self, workloads: Iterable[RunningWorkload] = ()) -> None:
        self._workloads: dict[str, RunningWorkload] = {}
        self._gangs: dict[str, _Gang] = {}
        self._order: list[tuple[int, float, str]] = []
        self._team_gpus: dict[str, float] = {}
        self._node_gangs: dict[str, set[str]] = {}
        for workload in workloads:
            self.add(workload)

    def __len__(self) -> int:
        return len(self._workloads)

    def __iter__(self) -> Iterator[RunningWorkload]:
        return iter(self._workloads.values())

    def get(self, workload_id: str) -> RunningWorkload:
        return self._workloads[workload_id]

    def gpus_by_team(self) -> dict[str, float]:
        return dict(self._team_gpus)

    def add(self, workload: RunningWorkload) -> None:
        if workload.id in self._workloads:
            raise ValueError(f"workload {workload.id} is already running")
        self._workloads[workload.id] = workload
        self._team_gpus[workload.team] = self._team_gpus.get(workload.team, 0.0) + workload.gpus
        key = workload.gang_id or workload.id
        gang = self._gangs.get(key)
        if gang is None:
            gang = _Gang(key, workload.team, priority=workload.priority, started_at=workload.started_at,
                         youngest_start=workload.started_at)
            self._gangs[key] = gang
        else:
            self._unlist(gang)
        gang.absorb(workload)
        bisect.insort(self._order, gang.order)
        for assignment in workload.assignments:
            self._node_gangs.setdefault(assignment.node, set()).add(key)

    def remove(self, workload_id: str) -> RunningWorkload:
        workload = self._workloads.pop(workload_id)
        self._team_gpus[workload.team] -= workload.gpus
        key = workload.gang_id or workload.id
        gang = self._gangs.pop(key)
        self._unlist(gang)
        rest = [self._workloads[member] for member in gang.members if member != workload_id]
        if rest:  # rebuild the survivors' gang so its cached figures stay exact
            rebuilt = _Gang(key, rest[0].team, priority=rest[0].priority, started_at=rest[0].started_at,
                            youngest_start=rest[0].started_at)
            for member in rest:
                rebuilt.absorb(member)
            self._gangs[key] = rebuilt
            bisect.insort(self._order, rebuilt.order)
        for name in gang.parts:
            if key not in self._gangs or name not in self._gangs[key].parts:
                self._node_gangs[name].discard(key)
        return workload

    def _unlist(self, gang: _Gang) -> None:
        at = bisect.bisect_left(self._order, gang.order)
        del self._order[at]

    def gangs_in_victim_order(self) -> Iterator[_Gang]:
        for _priority, _start, key in self._order:
            yield self._gangs[key]

    def gangs_on_node(self, name: str) -> list[_Gang]:
        """Gangs holding GPUs on node ``name``, cheapest victim first."""
        return sorted((self._gangs[key] for key in self._node_gangs.get(name, ())), key=lambda g: g.order)

    def members(self, gang: _Gang) -> list[RunningWorkload]:
        return [self._workloads[member] for member in gang.members]


@dataclass(slots=True)
class _Ledger:
    """Team positions during one decision: what each holds, its floor, and what the plan takes."""

    held: dict[str, float]
    floor: dict[str, float]
    entitled: dict[str, float]

    def borrowed_after(self, team: str, gpus: float, taken: dict[str, float]) -> float:
        return self.held.get(team, 0.0) - taken.get(team, 0.0) - gpus - self.floor.get(team, 0.0)


def _entitlement_map(entitlements: Sequence[Entitlement] | Mapping[str, Entitlement]) -> dict[str, Entitlement]:
    if isinstance(entitlements, Mapping):
        return dict(entitlements)
    return {entitlement.team: entitlement for entitlement in entitlements}


def select_victims(
    state_nodes: ClusterState | Sequence[Node],
    running: RunningSet | Sequence[RunningWorkload],
    request: Request,
    entitlements: Sequence[Entitlement] | Mapping[str, Entitlement],
    *,
    now: float,
    min_runtime_s: float,
    borrowers_only: bool = False,
    max_gpus: float | None = None,
) -> VictimPlan | Rejection:
    """The cheapest explainable set of whole gangs to stop so ``request`` can start (see module doc).

    ``borrowers_only`` (the reclaim of a guarantee, ``reclaim.plan_reclaims``) takes victims from other
    teams' borrowed capacity only, never from the requesting team's own lower-priority work. ``max_gpus``
    (reclaim's budget: the owner's pending demand within its guarantee) bounds the GPUs the victims hold
    together: the search looks past a cheaper gang too big for it to smaller ones, instead of choosing it and
    having the plan refused afterwards.

    ``state_nodes`` must already account for ``running`` (their GPUs are not free). When the request
    already fits, the plan has no victims. Pass a ``ClusterState`` and a ``RunningSet`` kept up to
    date to make repeated decisions cheap; plain sequences are indexed first (O(running) per call).
    """
    state = state_nodes if isinstance(state_nodes, ClusterState) else ClusterState(state_nodes)
    index = running if isinstance(running, RunningSet) else RunningSet(running)
    direct = state.place(request, "best-fit")
    if isinstance(direct, Placement):
        return VictimPlan(request.id, (), direct, ("fits without preemption",))
    by_team = _entitlement_map(entitlements)
    ledger = _Ledger(
        held=index.gpus_by_team(),
        floor={team: e.guaranteed for team, e in by_team.items()},
        entitled={team: max(e.guaranteed, e.allocation) for team, e in by_team.items()},
    )
    reclaiming = ledger.held.get(request.team, 0.0) + request.gpus <= ledger.entitled.get(request.team, 0.0)
    search = _Search(state, index, request, ledger, reclaiming, now, min_runtime_s, borrowers_only, max_gpus)
    return search.run()


WALK_BUDGET = 16  # gangs the exact cheapest-first walk visits before switching to the node scan
SCAN_CANDIDATES = 16  # feasible nodes compared by the node scan (kube-scheduler samples similarly)

SAME_TEAM = "same-team"
RECLAIM = "reclaim"
BORROWED_LOWER_PRIORITY = "borrowed-lower-priority"


class _Search:
    """One victim search: walk gangs cheapest first until some node (or the gang) can host the request."""

    def __init__(self, state: ClusterState, index: RunningSet, request: Request, ledger: _Ledger,
                 reclaiming: bool, now: float, min_runtime_s: float, borrowers_only: bool = False,
                 max_gpus: float | None = None) -> None:
        self.state = state
        self.max_gpus = max_gpus
        self.borrowers_only = borrowers_only
        self.index = index
        self.request = request
        self.ledger = ledger
        self.reclaiming = reclaiming
        self.now = now
        self.min_runtime_s = min_runtime_s
        self.shape = Shape.of(request)
        self.single = request.members == 1
        self.chosen: list[tuple[_Gang, str]] = []
        self.skipped: dict[str, int] = {}
        self.scratch: dict[int, list[int]] = {}
        self.gangs_on: dict[int, list[int]] = {}  # node -> positions in self.chosen
        self.host_ok: dict[int, bool] = {}

    def run(self) -> VictimPlan | Rejection:
        freed = 0.0
        next_trial = self.request.gpus - self.state.gpu_free
        taken: dict[str, float] = {}
        for visited, gang in enumerate(self.index.gangs_in_victim_order()):
            if gang.priority >= self.request.priority and not self.reclaiming:
                break  # victims are ordered by priority: nothing further is eligible
            if self.single and visited >= WALK_BUDGET:
                return self._scan_nodes()
            rule = self._eligibility(gang, taken)
            if not rule:
                continue
            self.chosen.append((gang, rule))
            taken[gang.team] = taken.get(gang.team, 0.0) + gang.gpus
            freed += gang.gpus
            if self.single:
                node = self._free_on_nodes(gang, len(self.chosen) - 1)
                if node is not None:
                    return self._plan_on_node(node)
            elif freed >= next_trial:
                plan = self._trial_gang()
                if plan is not None:
                    return plan
                next_trial = max(freed * 2, next_trial + 1)
        if not self.single and self.chosen:
            plan = self._trial_gang()
            if plan is not None:
                return plan
        return self._rejection()

    # ------------------------------------------------------------------ eligibility
    def _eligibility(self, gang: _Gang, taken: dict[str, float]) -> str:
        """Which rule lets this gang be preempted ("" if none; the refusal is tallied for the rejection).

        Kept free of string formatting: it runs for every gang the walk passes.
        """
        if not gang.preemptible:
            return self._skip("not preemptible")
        if self.now - gang.youngest_start < self.min_runtime_s:
            return self._skip("inside its minimum runtime")
        if gang.team == self.request.team:
            if self.borrowers_only:
                return self._skip("the requester's own work (reclaim takes from borrowers only)")
            if gang.priority >= self.request.priority:
                return self._skip("same team, not lower priority")
            return SAME_TEAM
        if self.ledger.borrowed_after(gang.team, gang.gpus, taken) < -1e-9:
            return self._skip("would take its team below the guaranteed floor")
        if self.max_gpus is not None and gang.gpus + sum(taken.values()) > self.max_gpus + 1e-9:
            return self._skip("more GPUs than the owner's pending demand within its guarantee")
        if self.reclaiming:
            return RECLAIM
        if gang.priority < self.request.priority:
            return BORROWED_LOWER_PRIORITY
        return self._skip("not lower priority and the requester is not reclaiming")

    def _explain(self, gang: _Gang, rule: str) -> str:
        lost = sum(m.gpus * max(0.0, self.now - m.started_at) for m in self.index.members(gang))
        ran = f"ran {self.now - gang.started_at:.0f}s ({lost:.0f} GPU-s lost)"
        priority = f"priority {gang.priority} < {self.request.priority}"
        if rule == SAME_TEAM:
            return f"same team {gang.team}, {priority}; {ran}"
        borrowed = self.ledger.held.get(gang.team, 0.0) - self.ledger.floor.get(gang.team, 0.0)
        why = f"team {gang.team} borrows {borrowed:g} GPUs above its guarantee"
        if rule == RECLAIM:
            return f"{why}; reclaimed for {self.request.team}, which is under its entitlement; {ran}"
        return f"{why}; {priority}; {ran}"

    def _skip(self, why: str) -> str:
        self.skipped[why] = self.skipped.get(why, 0) + 1
        return ""

    # ------------------------------------------------------------------ single-member requests
    def _free_on_nodes(self, gang: _Gang, position: int) -> int | None:
        """Add the gang's GPUs to the scratch free vectors; return a node that now hosts the request."""
        found: int | None = None
        for name, gpus in gang.parts.items():
            node = self.state.index_of(name)
            free = self.scratch.get(node)
            if free is None:
                free = self.scratch[node] = self.state.free_vector(node)
            for gpu, milli in gpus:
                free[gpu] = min(MILLI_PER_GPU, free[gpu] + milli)
            self.gangs_on.setdefault(node, []).append(position)
            if found is None and self._host_ok(node) and _fits(free, self.shape):
                found = node
        return found

    def _scan_nodes(self) -> VictimPlan | Rejection:
        """Node by node (from a start fixed by the request id), the cheapest victims that make room;
        the best of the first ``SCAN_CANDIDATES`` feasible nodes wins, like kube-scheduler's sampling.

        Used when the exact cheapest-first walk would be long: a 4- or 8-GPU request on a fleet of
        2-GPU jobs needs several victims on one node, which a global walk reaches only after
        thousands of steps.
        """
        self.chosen = []
        count = self.state.node_count
        start = zlib.crc32(self.request.id.encode()) % max(1, count)
        best: tuple[tuple[tuple[int, float, str], int, float], int, list[tuple[_Gang, str]]] | None = None
        found = 0
        for step in range(count):
            node = (start + step) % count
            if not self._host_ok(node):
                continue
            victims = self._victims_on(node)
            if victims is None:
                continue
            cost = (max(g.order for g, _ in victims), len(victims), sum(g.gpus for g, _ in victims))
            if best is None or cost < best[0]:
                best = (cost, node, victims)
            found += 1
            if found >= SCAN_CANDIDATES:
                break
        if best is None:
            return self._rejection()
        _cost, node, victims = best
        self.chosen = victims
        self.gangs_on = {node: list(range(len(victims)))}
        return self._plan_on_node(node)

    def _victims_on(self, node: int) -> list[tuple[_Gang, str]] | None:
        """Cheapest eligible gangs on ``node`` that together make room, or None if they cannot."""
        name = self.state.node_name(node)
        free = self.state.free_vector(node)
        taken: dict[str, float] = {}
        victims: list[tuple[_Gang, str]] = []
        for gang in self.index.gangs_on_node(name):
            if gang.priority >= self.request.priority and not self.reclaiming:
                break
            rule = self._eligibility(gang, taken)
            if not rule:
                continue
            victims.append((gang, rule))
            taken[gang.team] = taken.get(gang.team, 0.0) + gang.gpus
            _release_into(free, gang, name)
            if _fits(free, self.shape):
                return victims
        return None

    def _host_ok(self, node: int) -> bool:
        ok = self.host_ok.get(node)
        if ok is None:
            ok = self.host_ok[node] = self.state.can_host(node, self.request, self.shape)
        return ok

    def _plan_on_node(self, node: int) -> VictimPlan:
        positions = self._prune(node, self.gangs_on[node])
        victims = [self.chosen[p] for p in positions]
        name = self.state.node_name(node)
        free = self.state.free_vector(node)
        for gang, _rule in victims:
            _release_into(free, gang, name)
        assignment = _member_on(free, self.shape, name)
        placement = Placement(self.request.id, (assignment,), TopologyLevel.NVLINK_DOMAIN, float(len(victims)),
                              (f"preempt {len(victims)} gang(s) on {name}",))
        return self._plan(victims, placement)

    def _prune(self, node: int, positions: list[int]) -> list[int]:
        """Drop victims (cheapest first) that the request does not need after all."""
        name = self.state.node_name(node)
        kept = list(positions)
        for position in positions:
            trial = [p for p in kept if p != position]
            free = self.state.free_vector(node)
            for p in trial:
                _release_into(free, self.chosen[p][0], name)
            if _fits(free, self.shape):
                kept = trial
        return kept

    # ------------------------------------------------------------------ gangs
    def _trial_gang(self) -> VictimPlan | None:
        trial = self._state_without(self.chosen)
        placement = trial.place(self.request, "best-fit")
        if not isinstance(placement, Placement):
            return None
        used = set(placement.nodes)
        needed = [(g, r) for g, r in self.chosen if self._gang_nodes(g) & used]
        if len(needed) < len(self.chosen):
            narrower = self._state_without(needed).place(self.request, "best-fit")
            if isinstance(narrower, Placement):
                return self._plan(needed, narrower)
        return self._plan(self.chosen, placement)

    def _state_without(self, victims: Sequence[tuple[_Gang, str]]) -> ClusterState:
        trial = self.state.copy()
        for gang, _reason in victims:
            for member in self.index.members(gang):
                trial.release(*running_placement(member))
        return trial

    @staticmethod
    def _gang_nodes(gang: _Gang) -> set[str]:
        return set(gang.parts)

    # ------------------------------------------------------------------ results
    def _plan(self, victims: Sequence[tuple[_Gang, str]], placement: Placement) -> VictimPlan:
        listed: list[Victim] = []
        for gang, rule in victims:
            reason = self._explain(gang, rule)
            for member in self.index.members(gang):
                lost = member.gpus * max(0.0, self.now - member.started_at)
                listed.append(Victim(member.id, member.team, member.gpus, member.priority, gang.key, lost, reason))
        mode = "reclaiming its entitlement" if self.reclaiming else "by priority"
        return VictimPlan(self.request.id, tuple(listed), placement,
                          (f"{self.request.team or 'request'} preempts {mode}: {plural(len(victims), 'gang')}",))

    def _rejection(self) -> Rejection:
        why = "; ".join(f"{count} gang(s) {reason}" for reason, count in sorted(self.skipped.items()))
        return Rejection(self.request.id, "preemption",
                         f"no eligible victims free enough room{': ' + why if why else ''}",
                         self.state.gpu_free, self.state.gpu_free)


def _fits(free: list[int], shape: Shape) -> bool:
    if shape.fractional:
        return any(milli >= shape.milli for milli in free)
    return free.count(MILLI_PER_GPU) >= shape.gpus  # free shares never exceed a whole GPU


def _release_into(free: list[int], gang: _Gang, node_name: str) -> None:
    for gpu, milli in gang.parts.get(node_name, ()):
        free[gpu] = min(MILLI_PER_GPU, free[gpu] + milli)


def _member_on(free: list[int], shape: Shape, node_name: str) -> MemberAssignment:
    if shape.fractional:
        gpu = min((g for g, milli in enumerate(free) if milli >= shape.milli), key=lambda g: (free[g], g))
        return MemberAssignment(0, node_name, (gpu,), shape.milli)
    gpus = tuple(g for g, milli in enumerate(free) if milli >= MILLI_PER_GPU)[: shape.gpus]
    return MemberAssignment(0, node_name, gpus, MILLI_PER_GPU)


def running_placement(workload: RunningWorkload) -> tuple[Placement, Request]:
    """A running workload as the (placement, request) pair ``ClusterState.release`` understands."""
    first = workload.assignments[0] if workload.assignments else None
    fractional = first is not None and first.gpu_milli < MILLI_PER_GPU
    request = Request(workload.id, members=max(1, len(workload.assignments)),
                      gpus_per_member=0 if fractional else (len(first.gpu_indices) if first else 1),
                      gpu_milli=first.gpu_milli if fractional and first else 0)
    return Placement(workload.id, workload.assignments, TopologyLevel.ANY), request


def apply_victim_plan(
    state: ClusterState, running: RunningSet, plan: VictimPlan, request: Request, *, now: float
) -> RunningWorkload:
    """Carry a plan out on the in-memory model (simulator, what-if): stop the victims, start the request.

    This changes only ``state`` and ``running``; stopping real work is the actuators' job.
    """
    for victim in plan.victims:
        state.release(*running_placement(running.remove(victim.workload_id)))
    state.commit(plan.placement, request)
    started = RunningWorkload(request.id, request.team, request.gpus, plan.placement.assignments,
                              priority=request.priority, started_at=now, kind=request.kind)
    running.add(started)
    return started
