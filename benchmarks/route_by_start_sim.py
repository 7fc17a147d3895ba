"""Rule-only routing against routing by predicted start, in the simulator, on a public trace (Philly).

The siloed fleet of ``simulate_replay("siloed")``: Slurm (EASY backfill, exclusive nodes), Kubernetes
(greedy) and Ray (FCFS) pools sized by each team's demand; the rule sends every job to its team's
orchestrator (``scenario.orchestrator_of_team``, by the shape of the team's jobs). The other run routes
each arrival with ``engine.routing.route_by_start`` over the live pools (their free GPUs, queues and
running work as ``PoolSnapshot``s) among the pools that can ever hold the job. Same jobs, same seed.
Prints one JSON line with mean and p95 wait (hours) of each, and CPU seconds.

    python benchmarks/route_by_start_sim.py [--jobs 3000] [--trace philly]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from scheduling.engine.routing import route_by_start
from scheduling.engine.startplan import PoolSnapshot
from scheduling.engine.types import RunningWorkload
from scheduling.simulation.pools import Pool
from scheduling.simulation.replay import JobRun, Replay
from scheduling.simulation.runner import build_fleet, default_capacity, pools_for
from scheduling.simulation.scenario import build_scenario
from scheduling.traces import load_trace

HOUR = 3600.0


class RouteByStartReplay(Replay):
    """The same replay, but each arrival goes where ``route_by_start`` predicts it starts first (the team's
    orchestrator, the rule's choice, is its home: another pool must start it ``min_gain_s`` sooner)."""

    min_gain_s = 0.0
    guest_max_s: float | None = None

    def pool_for(self, run: JobRun) -> str:
        request = run.job.request
        fits = [pool for pool in self.pools.values() if not pool.never_fits(request)]
        if len(fits) < 2:
            return super().pool_for(run)
        decision = route_by_start(replace(request, orchestrator=""), [snapshot(pool, self.now) for pool in fits],
                                  now=self.now, home=super().pool_for(run), min_gain_s=self.min_gain_s,
                                  guest_max_s=self.guest_max_s)
        return decision.orchestrator or super().pool_for(run)


def snapshot(pool: Pool, now: float) -> PoolSnapshot:
    running = tuple(
        RunningWorkload(run.alloc.id, run.team, run.alloc.gpus, run.placement.assignments,
                        expected_end=(run.start or now) + run.job.request.duration_estimate_s
                        if run.job.request.duration_estimate_s > 0 else None)
        for run in pool.running.values() if run.alloc is not None and run.placement is not None
    )
    queue = tuple(run.alloc or run.job.request for run in pool.pending)
    return PoolSnapshot(pool.name, pool.state.nodes(), queue, running)


def waits(replay: Replay) -> dict[str, float]:
    hours = sorted((run.first_start - run.job.submit_s) / HOUR for run in replay.runs if run.first_start is not None)
    if not hours:
        return {"started": 0}
    p95 = hours[min(len(hours) - 1, math.ceil(0.95 * len(hours)) - 1)]
    return {"started": len(hours), "mean_wait_h": round(sum(hours) / len(hours), 3), "p95_wait_h": round(p95, 3)}


def run(kind: type[Replay], jobs, pools, scenario) -> tuple[dict[str, float], float]:
    started = time.process_time()
    replay = kind(jobs, pools, scenario, policy="siloed", seed=0)
    replay.run()
    return waits(replay), time.process_time() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trace", default="philly")
    parser.add_argument("--jobs", type=int, default=3000)
    parser.add_argument("--min-gain-h", type=float, default=1.0,
                        help="leave the team's orchestrator only to start this much sooner (default 1 h)")
    parser.add_argument("--guest-max-h", type=float, default=4.0,
                        help="only jobs expected to end within this may leave it (default 4 h; 0 = no limit)")
    args = parser.parse_args()
    RouteByStartReplay.min_gain_s = args.min_gain_h * HOUR
    RouteByStartReplay.guest_max_s = args.guest_max_h * HOUR if args.guest_max_h > 0 else None
    trace = load_trace(args.trace, on_error="skip")
    jobs = tuple(sorted(trace.jobs, key=lambda job: job.submit_s)[: args.jobs])
    nodes = build_fleet(default_capacity(jobs, 8), gpus_per_node=8)
    scenario = build_scenario(jobs, sum(node.gpu_total for node in nodes))
    pools = pools_for("siloed", nodes, scenario, jobs)
    rule, rule_cpu = run(Replay, jobs, pools, scenario)
    by_start, start_cpu = run(RouteByStartReplay, jobs, pools, scenario)
    print(json.dumps({
        "benchmark": "route_by_start_sim", "trace": args.trace, "jobs": len(jobs),
        "pools": {spec.name: sum(n.gpu_total for n in spec.nodes) for spec in pools},
        "rule_only": {**rule, "cpu_s": round(rule_cpu, 2)},
        "route_by_start": {**by_start, "cpu_s": round(start_cpu, 2), "min_gain_h": args.min_gain_h,
                           "guest_max_h": args.guest_max_h},
    }))


if __name__ == "__main__":
    main()
