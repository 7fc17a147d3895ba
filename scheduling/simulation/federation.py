"""The federated policy's extra behaviour on top of one shared pool, decided by the engine.

* **Fair share** (``fairshare.order_pending``): the queue is served teams with the least usage per
  share first (usage = GPUs the team holds now; share = the larger of its weighted fair share and its
  guarantee, from ``fairshare.entitlements``), then priority, then submission time.
* **Preemption of borrowed capacity** (``preemption.select_victims``): every cycle, a team holding less
  than ``min(demand, guarantee)`` whose first queued job does not fit asks the engine for victims
  (borrowed capacity only, gang-atomic, cheapest first, never younger than ``MIN_RUNTIME_S``); the
  victims restart from the beginning (work lost is reported) and the job starts where the engine's plan
  put it.
* **Backfill**: the shared pool's ``easy`` discipline (``backfill.easy_backfill``, see pools.py).
* **Node moves**: nodes carry an owner orchestrator. When an idle node starts a job routed to another
  orchestrator, the rebalancer has moved it (drained node, so no drain cost); each such hand-over is
  counted. (The engine's placement does not filter by orchestrator, so concurrent jobs of two
  orchestrators on one node are possible in this model: reported as ``shared_node_starts``.)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from scheduling.engine.fairshare import entitlements, order_pending
from scheduling.engine.preemption import select_victims
from scheduling.engine.types import Entitlement, VictimPlan

if TYPE_CHECKING:
    from scheduling.simulation.pools import Pool
    from scheduling.simulation.replay import JobRun, Replay

MIN_RUNTIME_S = 600.0


@dataclass
class Federation:
    min_runtime_s: float = MIN_RUNTIME_S
    preemptions: int = 0
    lost_gpu_s: float = 0.0
    node_moves: int = 0
    shared_node_starts: int = 0
    owner: dict[str, str] = field(default_factory=dict)
    busy: dict[str, set[int]] = field(default_factory=dict)
    entitled: dict[str, Entitlement] = field(default_factory=dict)

    # -- fair share -------------------------------------------------------------------------------
    def refresh_entitlements(self, replay: Replay) -> dict[str, Entitlement]:
        demand, held = replay.team_demand()
        result = entitlements(replay.scenario.teams, replay.capacity_gpus, demand, held)
        self.entitled = {entitlement.team: entitlement for entitlement in result}
        return self.entitled

    def order(self, replay: Replay, pool: Pool) -> list[JobRun]:
        if len(pool.pending) < 2:
            return pool.pending
        if not self.entitled:
            self.refresh_entitlements(replay)
        if pool.fair_queue is not None:  # order_pending's order, without sorting the whole queue each pass
            return pool.fair_queue.ordered(replay.acct.used_by_team, self.entitled)
        by_id = {run.alloc.id: run for run in pool.pending if run.alloc is not None}
        requests = [run.alloc for run in by_id.values() if run.alloc is not None]
        ordered = order_pending(requests, replay.acct.used_by_team, self.entitled)
        return [by_id[request.id] for request in ordered]

    # -- node ownership ---------------------------------------------------------------------------
    def on_start(self, replay: Replay, run: JobRun) -> None:
        assert run.placement is not None
        for name in run.placement.nodes:
            jobs = self.busy.setdefault(name, set())
            owner = self.owner.get(name)
            if not jobs and owner and owner != run.orchestrator:
                self.node_moves += 1
            elif jobs and owner and owner != run.orchestrator:
                self.shared_node_starts += 1
            if not jobs:
                self.owner[name] = run.orchestrator
            jobs.add(run.index)

    def on_stop(self, run: JobRun) -> None:
        if run.placement is None:
            return
        for name in run.placement.nodes:
            self.busy.get(name, set()).discard(run.index)

    # -- preemption -------------------------------------------------------------------------------
    def cycle(self, replay: Replay) -> None:
        self.refresh_entitlements(replay)
        demand, held = replay.team_demand()
        for pool in replay.pools.values():
            for team in sorted(demand):
                floor = min(demand[team], replay.scenario.guarantee(team))
                if held.get(team, 0.0) + 1e-9 < floor:
                    self.reclaim_for(replay, pool, team)

    def reclaim_for(self, replay: Replay, pool: Pool, team: str) -> None:
        waiting = next((run for run in pool.pending if run.team == team), None)
        if waiting is None or waiting.alloc is None or waiting.alloc.gpus <= pool.state.gpu_free:
            return
        if pool.victim_index is None:
            return
        plan = select_victims(
            pool.state, pool.victim_index, waiting.alloc, self.entitled,
            now=replay.now, min_runtime_s=self.min_runtime_s,
        )
        if not isinstance(plan, VictimPlan) or not plan.victims:
            return
        for victim_id in dict.fromkeys(victim.workload_id for victim in plan.victims):
            run = pool.running_by_id[victim_id]
            self.lost_gpu_s += run.allocated_gpus * (replay.now - (run.start or replay.now))
            self.on_stop(run)
            replay.preempt(run)
            self.preemptions += 1
        pool.start_queued(waiting, plan.placement, replay.now)
        replay.started(waiting, pool)
