"""Replay mode: a discrete-event simulation of timed arrivals and completions with queues.

Events are arrivals, completions, and periodic cycles (sampling; for the federated policy also fair
share, preemption and rebalancing). Events at the same instant are handled completions first, then
arrivals, then cycles, and only then does each pool whose state changed run one scheduling pass, so
a pass sees everything that happened at that instant. Every placement is decided by the engine
(``ClusterState.place``); this module only decides *which* pending job is tried next and *when*.

Deterministic: no clock (only ``perf_counter`` for the reported wall time), no global random; ties are
broken by job index; the engine receives a seed derived from the run seed and the job.
"""

from __future__ import annotations

import heapq
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial

from scheduling.engine.fairshare import entitlements, jain_index, share_normalised
from scheduling.engine.sizemix import size_mix_of
from scheduling.engine.types import MILLI_PER_GPU, Node, Placement, Request
from scheduling.simulation.accounting import Integrals, Samples
from scheduling.simulation.fast_state import CountingState
from scheduling.simulation.federation import Federation
from scheduling.simulation.pools import Pool, PoolSpec, exclusive_request
from scheduling.simulation.progress import ProgressCallback, Throttle
from scheduling.simulation.results import ReplayResult, build_result
from scheduling.simulation.scenario import Scenario
from scheduling.traces.records import TraceJob

COMPLETE, ARRIVE, CYCLE = 0, 1, 2
SAMPLE_INTERVAL_S = 3600.0


@dataclass
class JobRun:
    """Mutable bookkeeping of one job during a run (the trace job itself stays frozen)."""

    index: int
    job: TraceJob
    orchestrator: str
    pool: str = ""
    alloc: Request | None = None  # what was placed (an exclusive Slurm job asks for whole nodes)
    whole_gpus: float = 0.0  # wholly free GPUs ``alloc`` needs (0 for a share), set when queued
    placement: Placement | None = None
    first_start: float | None = None
    start: float | None = None
    end: float | None = None
    remaining_s: float = 0.0
    preemptions: int = 0
    rejected: str = ""
    epoch: int = 0  # bumped on preemption so the stale completion event is ignored
    team: str = field(init=False)
    gpus: float = field(init=False)  # what the job asks for (an exclusive allocation may hold more)

    def __post_init__(self) -> None:
        self.team = self.job.request.team
        self.gpus = self.job.request.gpus

    @property
    def allocated_gpus(self) -> float:
        return self.alloc.gpus if self.alloc is not None else 0.0


class Replay:
    """One run. Build with pools and a scenario; call :meth:`run` once."""

    def __init__(
        self,
        jobs: Sequence[TraceJob],
        pools: Sequence[PoolSpec],
        scenario: Scenario,
        *,
        policy: str,
        seed: int,
        federation: Federation | None = None,
        sample_interval_s: float = SAMPLE_INTERVAL_S,
        horizon_s: float | None = None,
        progress: ProgressCallback | None = None,
        router: Callable[[str, str], str | None] | None = None,
        give_up: Callable[[Replay], bool] | None = None,
    ) -> None:
        """``router(team, orchestrator)`` names each job's pool (a pool file's rules); without one, a
        single pool takes every job and several pools are chosen by orchestrator. ``give_up(replay)``,
        asked at every cycle, ends the run early when it says the outcome is already known
        (``stopped_early_s`` then holds the time; see ``capacity.p95_certainly_above``)."""
        self.give_up = give_up
        self.stopped_early_s: float | None = None
        self.policy = policy
        self.router = router
        self.seed = seed
        self.scenario = scenario
        self.federation = federation
        self.sample_interval_s = sample_interval_s
        self.horizon_s = horizon_s
        self.progress = progress
        mix = size_mix_of(job.request for job in jobs)
        self.pools = {spec.name: Pool(spec, CountingState.from_nodes(spec.nodes, size_mix=mix), mix) for spec in pools}
        for pool in self.pools.values():
            if pool.spec.reservation != "earliest":
                pool.elsewhere = partial(_ends_elsewhere, [other for other in self.pools.values() if other is not pool])
        if len({job.request.id for job in jobs}) != len(jobs):
            raise ValueError("job ids must be unique within a trace (the engine reports decisions by request id)")
        self.runs = [
            JobRun(i, job, scenario.orchestrator_for(job), remaining_s=job.duration_s or 0.0)
            for i, job in enumerate(jobs)
        ]
        submits = [job.submit_s for job in jobs] or [0.0]
        self.acct = Integrals(window_start=min(submits), window_end=max(submits), last_time=min(submits))
        self.samples = Samples()
        self.capacity_gpus = sum(pool.capacity_gpus for pool in self.pools.values())
        self.events: list[tuple[float, int, int, int, int]] = []
        self.now = min(submits)
        self.dirty: set[str] = set()
        self.queued_by_team: dict[str, float] = {}  # GPUs asked for by queued jobs, kept by the event loop

    # -- events -----------------------------------------------------------------------------------
    def push(self, when: float, kind: int, index: int, epoch: int = 0) -> None:
        heapq.heappush(self.events, (when, kind, index, epoch, len(self.events)))

    def run(self) -> ReplayResult:
        started = time.perf_counter()
        for run in self.runs:
            self.push(run.job.submit_s, ARRIVE, run.index)
        self.push(self.now, CYCLE, 0)
        tick = Throttle(self.progress, 2 * len(self.runs))
        handled = 0
        while self.events:
            when = self.events[0][0]
            if self.horizon_s is not None and when > self.horizon_s:
                break
            self.acct.advance(when)
            self.now = when
            while self.events and self.events[0][0] == when:
                _, kind, index, epoch, _ = heapq.heappop(self.events)
                if kind == CYCLE:
                    self.cycle()
                    continue
                handled += 1
                self.complete(index, epoch) if kind == COMPLETE else self.arrive(index)
            self.schedule_dirty()
            tick(handled)
        self.acct.advance(self.acct.window_end)
        return build_result(self, wall_time_s=time.perf_counter() - started)

    def arrive(self, index: int) -> None:
        run = self.runs[index]
        pool = self.pools[self.pool_for(run)]
        run.pool = pool.name
        if is_cpu_only(run.job.request):
            run.rejected = pool.cpu_only_never_fits(run.job.request)
            if not run.rejected:
                pool.cpu_waiting.append(run)
                self.dirty.add(pool.name)
            return
        reason = pool.never_fits(run.job.request)
        if reason:
            run.rejected = reason
            return
        pool.enqueue(run)
        self.queued(run, +1)
        self.dirty.add(pool.name)

    def complete(self, index: int, epoch: int) -> None:
        run = self.runs[index]
        if epoch != run.epoch or run.end is not None or run.placement is None:
            return  # a completion scheduled before the job was preempted
        if self.federation is not None:
            self.federation.on_stop(run)
        self.stop(run)
        run.end = self.now
        run.remaining_s = 0.0

    def cycle(self) -> None:
        if self.federation is not None:
            self.federation.cycle(self)
        self.sample()
        if self.give_up is not None and self.give_up(self):
            self.stopped_early_s = self.now
            self.events.clear()
            return
        if self.has_future_work():
            self.push(self.now + self.sample_interval_s, CYCLE, 0)

    def has_future_work(self) -> bool:
        return any(kind != CYCLE for _, kind, *_ in self.events) or any(p.pending for p in self.pools.values())

    # -- placement --------------------------------------------------------------------------------
    def pool_for(self, run: JobRun) -> str:
        if self.router is not None:
            name = self.router(run.team, run.orchestrator)
            if name is None or name not in self.pools:
                raise ValueError(f"job {run.job.id!r} (team {run.team!r}, kind {run.orchestrator!r}) matches no pool")
            return name
        if len(self.pools) == 1:
            return next(iter(self.pools))
        return run.orchestrator if run.orchestrator in self.pools else next(iter(self.pools))

    def order_for(self, pool: Pool) -> Callable[[], list[JobRun]] | None:
        """The pool's queue order: fair share (the federation's), priority, or arrival (``None``)."""
        if pool.spec.queue == "fairshare" and self.federation is not None:
            return partial(self.federation.order, self, pool)
        if pool.spec.queue == "priority":
            return partial(priority_order, pool)
        return None

    def schedule_dirty(self) -> None:
        for name in sorted(self.dirty):
            pool = self.pools[name]
            for run in pool.start_cpu_only(self.now) if pool.cpu_waiting else ():
                self.started(run, pool, queued=False)
            for run in pool.schedule(self.now, self.seed, self.order_for(pool)):
                self.started(run, pool)
        self.dirty.clear()

    def started(self, run: JobRun, pool: Pool, *, queued: bool = True) -> None:
        if run.first_start is None:
            run.first_start = self.now
        run.start = self.now
        if queued:
            self.queued(run, -1)
        self.acct.start(run.team, run.allocated_gpus, run.gpus, pool=pool.name)
        if self.federation is not None:
            self.federation.on_start(self, run)
        self.push(self.now + run.remaining_s, COMPLETE, run.index, run.epoch)

    def stop(self, run: JobRun) -> None:
        pool = self.pools[run.pool]
        pool.release(run)
        self.acct.stop(run.team, run.allocated_gpus, run.gpus, pool=pool.name)
        self.dirty.add(pool.name)

    def preempt(self, run: JobRun) -> None:
        """Stop ``run`` and put it back in its queue; it restarts from the beginning (no checkpoint)."""
        self.stop(run)
        run.preemptions += 1
        run.epoch += 1
        run.remaining_s = run.job.duration_s or 0.0
        run.placement = None
        run.start = None
        self.pools[run.pool].enqueue(run, front=True)
        self.queued(run, +1)

    def queued(self, run: JobRun, sign: int) -> None:
        self.queued_by_team[run.team] = self.queued_by_team.get(run.team, 0.0) + sign * run.gpus

    # -- samples ----------------------------------------------------------------------------------
    def sample(self) -> None:
        samples = self.samples
        samples.times_s.append(self.now)
        samples.allocated_gpus.append(self.acct.allocated)
        samples.pending_gpus.append(sum(self.queued_by_team.values()))
        samples.fragmented_gpus.append(sum(pool.fragmented_gpus() for pool in self.pools.values()))
        demand, held = self.team_demand()
        for team, wanted in demand.items():
            if wanted <= 0:
                continue
            samples.demanding[team] += 1
            guaranteed = self.scenario.guarantee(team)
            if held.get(team, 0.0) + 1e-9 < min(wanted, guaranteed):
                samples.below_guarantee[team] += 1
        samples.jain.append(self.jain(demand, held))

    def jain(self, demand: dict[str, float], held: dict[str, float]) -> float:
        """Jain's index of held / entitled GPUs over teams with demand (the engine's entitlements: floors,
        then weighted max-min capped by demand; 1.0 when every demanding team holds exactly that)."""
        entitled = entitlements(self.scenario.teams, self.capacity_gpus, demand, held)
        shares = {e.team: e.allocation for e in entitled if demand.get(e.team, 0.0) > 0}
        return jain_index(share_normalised(held, shares))

    def team_demand(self) -> tuple[dict[str, float], dict[str, float]]:
        """GPUs each team wants (running + queued) and holds now (teams with none are left out)."""
        held = {team: gpus for team, gpus in self.acct.used_by_team.items() if gpus > 1e-9}
        demand: dict[str, float] = {}
        for team in sorted(set(held) | set(self.queued_by_team)):
            wanted = held.get(team, 0.0) + self.queued_by_team.get(team, 0.0)
            if wanted > 1e-9:
                demand[team] = wanted
        return demand, held


def is_cpu_only(request: Request) -> bool:
    return not request.gpus_per_member and not request.gpu_milli


def priority_order(pool: Pool) -> list[JobRun]:
    """Higher ``priority`` first, then arrival (job index), like Slurm's priority/basic."""
    return sorted(pool.pending, key=lambda run: (-run.job.request.priority, run.job.submit_s, run.index))


def gpu_capacity(nodes: Sequence[Node]) -> int:
    return sum(node.gpu_total for node in nodes)


__all__ = ["MILLI_PER_GPU", "JobRun", "Replay", "exclusive_request", "gpu_capacity"]


def _ends_elsewhere(others: list[Pool], now: float) -> list[float]:
    """Expected ends of the running work of ``others``, soonest first (overdue work counts as ``now``)."""
    return list(heapq.merge(*(pool.ending.ends(now) for pool in others)))
