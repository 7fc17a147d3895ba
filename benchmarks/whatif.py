"""What-if speed: a 4-week what-if (baseline + scenario) over 1,000 nodes (8,000 GPUs); target <= 60 s.

The history is synthetic (seeded), shaped like a federation's mix: 1-GPU inference and sweeps, 2-8 GPU
jobs, 2-4 node gangs routed to Slurm, 20 teams with weights and guarantees, an inference floor on
weekdays 08-20, at ``--load`` (default 0.6) of the fleet's GPU-hours. The scenario removes a tenth of the
nodes (100 of 1,000) and moves 10 points of weight; ``benchmarks/fanout.py`` fans the same two out.
Both runs go through ``run_whatif``, exactly as the Celery task runs them (no database: the service only
adds the queries that build these inputs).
Prints a JSON line: jobs, wall and CPU time of each run and of both; then one for the forecast's fitting
cost (50 team series of 8 weeks of hourly demand, as the forecast page and the weekly report fit them).
"""

import argparse
import json
import random
import sys
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from scheduling.engine.calendar import PolicyRule
from scheduling.engine.types import Request, TeamSpec, TopologyLevel, WorkloadKind
from scheduling.forecasting import forecast_demand
from scheduling.simulation.fleet import build_fleet
from scheduling.simulation.whatif import WhatIfInputs, run_whatif
from scheduling.traces.records import TraceJob

WEEK_S = 7 * 86400
SHAPES = (
    (1, 1, 1800, "kubernetes"),
    (1, 2, 3600, "kubernetes"),
    (1, 4, 4 * 3600, "ray"),
    (1, 8, 6 * 3600, "slurm"),
    (2, 8, 8 * 3600, "slurm"),
    (4, 8, 8 * 3600, "slurm"),
)
WEIGHTS = (40, 20, 15, 12, 8, 5)


def history(weeks: int, gpus: int, load: float, seed: int) -> tuple[TraceJob, ...]:
    rng = random.Random(seed)
    mean_gpu_s = sum(w * m * g * d for w, (m, g, d, _) in zip(WEIGHTS, SHAPES, strict=True)) / sum(WEIGHTS)
    rate = load * gpus / mean_gpu_s
    jobs, t = [], 0.0
    while True:
        t += rng.expovariate(rate)
        if t >= weeks * WEEK_S:
            return tuple(jobs)
        members, per, duration, orchestrator = rng.choices(SHAPES, WEIGHTS)[0]
        duration *= rng.uniform(0.3, 1.7)
        request = Request(
            id=f"j{len(jobs)}",
            members=members,
            gpus_per_member=per,
            team=f"team{rng.randrange(20):02d}",
            topology=TopologyLevel.LEAF_SWITCH if members > 1 else TopologyLevel.ANY,
            priority=rng.choice((0, 10)),
            kind=WorkloadKind.TRAINING if members > 1 else WorkloadKind.INFERENCE,
            duration_estimate_s=duration,
            submitted_at=t,
            orchestrator=orchestrator,
        )
        jobs.append(TraceJob(request, t, duration))


def timed(inputs: WhatIfInputs) -> tuple[dict, float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    figures = run_whatif(inputs)
    return figures, time.perf_counter() - wall, time.process_time() - cpu


def baseline_and_scenario(weeks: int, node_count: int, load: float, seed: int) -> tuple[WhatIfInputs, WhatIfInputs]:
    """Today's fleet and teams, and the same without a tenth of the nodes and with 10 points of weight moved."""
    nodes = build_fleet(node_count * 8, gpu_model="H100")
    jobs = history(weeks, node_count * 8, load, seed)
    teams = tuple(TeamSpec(f"team{i:02d}", None, 5.0, 150, 2000) for i in range(20))
    floor = PolicyRule("inference business hours", "kubernetes", frozenset({1, 2, 3, 4, 5}), 480, 1200, 1600)
    baseline = WhatIfInputs(jobs, nodes, teams, (floor,), seed=seed)
    moved = (replace(teams[0], weight=15.0), replace(teams[1], weight=0.0), *teams[2:])
    return baseline, replace(baseline, nodes=nodes[: -node_count // 10], teams=moved)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--weeks", type=int, default=4)
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--load", type=float, default=0.6)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    baseline, scenario = baseline_and_scenario(args.weeks, args.nodes, args.load, args.seed)
    jobs = baseline.jobs
    base, base_wall, base_cpu = timed(baseline)
    new, new_wall, new_cpu = timed(scenario)
    print(
        json.dumps(
            {
                "bench": "whatif_4_weeks_1000_nodes",
                "weeks": args.weeks,
                "nodes": args.nodes,
                "load": args.load,
                "jobs": len(jobs),
                "target_s": 60,
                "baseline": {
                    "wall_s": round(base_wall, 2),
                    "cpu_s": round(base_cpu, 2),
                    "utilisation": round(base["utilisation"], 4),
                    "wait_p95_h": base["wait_hours"]["all"]["p95"],
                },
                "scenario": {
                    "wall_s": round(new_wall, 2),
                    "cpu_s": round(new_cpu, 2),
                    "utilisation": round(new["utilisation"], 4),
                    "wait_p95_h": new["wait_hours"]["all"]["p95"],
                },
                "wall_s": round(base_wall + new_wall, 2),
                "cpu_s": round(base_cpu + new_cpu, 2),
            }
        )
    )


def forecast_cost(series: int = 50, weeks: int = 8) -> None:
    rng = random.Random(3)
    hours = weeks * 168
    data = [
        [20 + 10 * ((h % 168) < 120 and 8 <= h % 24 < 20) + rng.gauss(0, 3) + 0.01 * h for h in range(hours)]
        for _ in range(series)
    ]
    wall, cpu = time.perf_counter(), time.process_time()
    fits = [forecast_demand(values, start_hour_of_week=0, horizon=14 * 24) for values in data]
    print(json.dumps({
        "bench": "forecast_fit", "series": series, "hours_each": hours, "ok": sum(f.ok for f in fits),
        "wall_s": round(time.perf_counter() - wall, 3), "cpu_s": round(time.process_time() - cpu, 3),
    }))


if __name__ == "__main__":
    main()
    forecast_cost()
