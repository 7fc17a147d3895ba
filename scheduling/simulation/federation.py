"""The federated policy's extra behaviour on top of one shared pool.

* **Fair share**: the queue is ordered by each team's held GPUs divided by its weight (least served
  first; FIFO within a team), i.e. weighted max-min.
* **Preemption of borrowed capacity**: every cycle, a team holding less than ``min(demand, guarantee)``
  whose oldest queued job does not fit may reclaim GPUs from teams above their guarantee: lowest
  priority first, then least work lost, never a job younger than ``MIN_RUNTIME_S``, gang-atomic, and
  only when enough GPUs can be freed. Victims restart from the beginning (work lost is reported).
* **Node moves**: nodes carry an owner orchestrator. When an idle node starts a job routed to another
  orchestrator, the rebalancer has moved it (drained node, so no drain cost); each such hand-over is
  counted. (The engine's placement does not filter by orchestrator, so concurrent jobs of two
  orchestrators on one node are possible in this model: reported as ``shared_node_starts``.)

The engine's ``fairshare``/``preemption`` modules were not available when this was written; these
rules follow DESIGN.md section 4 and are the place to switch to them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

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

    # -- fair share -------------------------------------------------------------------------------
    def order(self, replay: Replay, pool: Pool) -> list[JobRun]:
        if len(pool.pending) < 2:
            return pool.pending
        held = replay.acct.used_by_team  # GPUs each team holds now, kept current by the event loop
        weight = replay.scenario.weight
        return sorted(pool.pending, key=lambda run: (held.get(run.team, 0.0) / weight(run.team), run.index))

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
        demand, held = replay.team_demand()
        for pool in replay.pools.values():
            for team in sorted(demand):
                floor = min(demand[team], replay.scenario.guarantee(team))
                if held.get(team, 0.0) + 1e-9 < floor:
                    self.reclaim_for(replay, pool, team, held)

    def reclaim_for(self, replay: Replay, pool: Pool, team: str, held: dict[str, float]) -> None:
        waiting = next((run for run in pool.pending if run.team == team), None)
        if waiting is None or waiting.alloc is None or waiting.alloc.gpus <= pool.state.gpu_free:
            return
        needed = waiting.alloc.gpus - pool.state.gpu_free
        victims = self.victims(replay, pool, held, needed)
        for victim in victims:
            self.lost_gpu_s += victim.gpus * (replay.now - (victim.start or replay.now))
            self.on_stop(victim)
            replay.preempt(victim)
            held[victim.team] -= victim.gpus
            self.preemptions += 1

    def victims(self, replay: Replay, pool: Pool, held: dict[str, float], needed: float) -> list[JobRun]:
        """Borrowed work to stop, cheapest first; empty unless it frees at least ``needed`` GPUs."""
        guarantee = replay.scenario.guarantee
        candidates = [
            run
            for run in pool.running.values()
            if held.get(run.team, 0.0) - run.gpus >= guarantee(run.team) - 1e-9
            and replay.now - (run.start or replay.now) >= self.min_runtime_s
        ]
        candidates.sort(key=lambda run: (run.job.request.priority, replay.now - (run.start or 0.0), run.index))
        chosen: list[JobRun] = []
        freed = 0.0
        borrowed = dict(held)
        for run in candidates:
            if borrowed[run.team] - run.gpus < guarantee(run.team) - 1e-9:
                continue  # stopping it would push its own team below the guarantee
            chosen.append(run)
            borrowed[run.team] -= run.gpus
            freed += run.allocated_gpus
            if freed >= needed:
                return chosen
        return []
