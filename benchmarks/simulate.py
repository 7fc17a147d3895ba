"""Simulator figures as JSON lines, printed as each run ends: FGD packing reproduction, Philly replay, speed.

    .venv/bin/python benchmarks/simulate.py                     # 3 policies x 10 seeds, full Philly runs
    .venv/bin/python benchmarks/simulate.py --quick             # seed 42 only, full Philly runs (the speed figures)
    .venv/bin/python benchmarks/simulate.py --only capacity     # bisection for p95 wait <= 1 h (long)
    .venv/bin/python benchmarks/simulate.py --only capacity --target every-team --target-hours 2
    .venv/bin/python benchmarks/simulate.py --only packing --policies fgd --seeds 42,43
    .venv/bin/python benchmarks/simulate.py --only packing --quick --policies best-fit,fgd \
        --fleet ../shared/traces/alibaba-clusterdata/cluster-trace-v2026-spot-gpu/node_info_df.csv

Needs ../shared/traces (openb is read from there, never copied). Every run prints one line with its wall
time and the CPU seconds of this process (``cpu_time_s``: what a run costs on one core when the machine is
shared); summaries follow each group. Published FGD medians are read from the FGD authors' cached results.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from scheduling.engine.placement import POLICIES
from scheduling.simulation import FGD_SEEDS, simulate_packing, simulate_replay
from scheduling.simulation.capacity import (
    TARGETS,
    P95CertainlyAbove,
    TargetUnreachable,
    smallest_capacity,
    target_measure,
    team_p95_waits_h,
)
from scheduling.traces import load_trace
from scheduling.traces.records import Trace
from scheduling.traces.registry import shared_traces_dir

PUBLISHED = "fgd-kubernetes-scheduler-simulator/experiments/analysis/expected_results/analysis_allo_discrete.csv"
# Which published policy each of ours is compared with: the k8s-* policies re-state the FGD artifact's
# plugins; the engine's own random/best-fit/fgd and our fgd-cpu / fgd-strand are compared with the nearest
# published one.
PUBLISHED_NAMES = {"random": "01-Random", "best-fit": "05-BestFit", "fgd": "06-FGD", "k8s-random": "01-Random",
                   "k8s-best-fit": "05-BestFit", "k8s-fgd": "06-FGD", "fgd-cpu": "06-FGD",
                   "fgd-strand": "06-FGD"}
PACKING_POLICIES = ("random", "best-fit", "fgd", "k8s-random", "k8s-best-fit", "k8s-fgd", "fgd-cpu", "fgd-strand")
REPLAY_POLICIES = ("siloed", "federated")


def emit(record: dict[str, object]) -> None:
    print(json.dumps(record), flush=True)


def timed(run: Callable[[], Any]) -> tuple[Any, float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    result = run()
    return result, time.perf_counter() - wall, time.process_time() - cpu


def published_medians(workload: str = "openb_pod_list_default", column: str = "100") -> dict[str, float]:
    """Median over seeds of the published allocation at ``column``% arrived, per policy."""
    path = shared_traces_dir() / PUBLISHED
    if not path.exists():
        return {}
    values: dict[str, list[float]] = {}
    with path.open(newline="", encoding="utf-8") as handle:
        for row in csv.DictReader(handle):
            if row["workload"] == workload:
                values.setdefault(row["sc_policy"], []).append(float(row[column]))
    return {ours: statistics.median(values[theirs]) for ours, theirs in PUBLISHED_NAMES.items() if theirs in values}


def packing(seeds: tuple[int, ...], policies: tuple[str, ...], fleet: str | None = None) -> None:
    trace = load_trace("openb-default", fleet=fleet)
    published = published_medians() if fleet is None else {}  # published figures are for openb's own nodes
    for policy in policies:
        at_100: list[float] = []
        frag_75: list[float] = []
        cpu_times: list[float] = []
        wall_times: list[float] = []
        for seed in seeds:
            result, wall, cpu = timed(partial(simulate_packing, trace, policy, seed=seed))
            cpu_times.append(round(cpu, 2))
            wall_times.append(round(wall, 2))
            at_100.append(result.at(100) or 0.0)
            frag_75.append(result.fragmentation_pct[75] or 0.0)
            emit({"figure": "packing_run", "trace": "openb_pod_list_default", "fleet": fleet or "openb",
                  "nodes": len(trace.nodes), "policy": policy, "seed": seed,
                  "allocation_at_100": result.at(100), "fragmentation_pct_at_75": result.fragmentation_pct[75],
                  "pods_placed": result.pods_placed, "wall_time_s": round(wall, 2), "cpu_time_s": round(cpu, 2)})
        median = statistics.median(at_100)
        reference = published.get(policy)
        emit({"figure": "fgd_packing", "trace": "openb_pod_list_default", "policy": policy, "seeds": list(seeds),
              "allocation_at_100_median": round(median, 2), "allocation_at_100_range": [min(at_100), max(at_100)],
              "published_median": reference, "published_policy": PUBLISHED_NAMES.get(policy),
              "difference": round(median - reference, 2) if reference is not None else None,
              "fragmentation_pct_at_75_median": round(statistics.median(frag_75), 2),
              "max_cpu_time_s": max(cpu_times), "max_wall_time_s": max(wall_times)})


def replay_record(trace_name: str, jobs: int, figures: dict[str, Any], wall: float, cpu: float) -> dict[str, Any]:
    waits = figures["wait_hours"]
    return {
        "figure": "replay",
        "trace": trace_name,
        "jobs": jobs,
        "policy": figures["policy"],
        "capacity_gpus": figures["capacity_gpus"],
        "allocation": round(figures["allocation"], 4),
        "utilisation": round(figures["utilisation"], 4),
        "wait_hours": {bucket: {q: _round(waits[bucket][q]) for q in ("p50", "p95", "p99")} for bucket in waits},
        "jct_hours": {q: _round(figures["jct_hours"]["all"][q]) for q in ("mean", "p50", "p95")},
        "jain_fairness": _round(figures["jain_fairness"], 3),
        "below_guarantee_share_max": max(figures["below_guarantee_share"].values(), default=0.0),
        "preemptions": figures["preemptions"],
        "preempted_gpu_hours_lost": _round(figures["preempted_gpu_hours_lost"]),
        "node_moves": figures["node_moves"],
        "mean_fragmented_gpus": _round(figures["fragmentation"]["mean_fragmented_gpus"]),
        "jobs_accounting": figures["jobs"],
        "pools": {name: pool["gpus"] for name, pool in figures["pools"].items()},
        "wall_time_s": round(wall, 1),
        "cpu_time_s": round(cpu, 1),
    }


def replay(trace_name: str, policies: tuple[str, ...], capacity: int | None) -> None:
    trace = load_trace(trace_name)
    for policy in policies:
        result, wall, cpu = timed(partial(simulate_replay, trace, policy, capacity_gpus=capacity))
        emit(replay_record(trace_name, len(trace.jobs), result.as_dict(), wall, cpu))


def capacity_for_wait(
    trace_name: str, policy: str, low: int, high: int, step: int, target_p95_h: float = 1.0, target: str = "fleet",
    *, jobs: int | None = None, early_stop: bool = True,
) -> None:
    """Smallest capacity (a multiple of ``step`` GPUs) whose p95 queue wait is within target
    (``simulation.capacity.smallest_capacity``): overall (``fleet``) or for every team, its rejected jobs
    counted as infinite waits (``every-team``); each probe is a replay and prints its own line. With
    ``early_stop`` a probe ends as soon as its p95 is certainly above the target (``P95CertainlyAbove``;
    the answer is the same, the failing probes' figures are then partial and their p95 is null)."""
    trace = _first_jobs(load_trace(trace_name), jobs)
    value_of = target_measure(target)
    team_p95: dict[int, dict[str, float | None]] = {}
    started_cpu = time.process_time()

    def measure(capacity: int) -> float:
        give_up = P95CertainlyAbove(target_p95_h, target) if early_stop else None
        result, wall, cpu = timed(lambda: simulate_replay(trace, policy, capacity_gpus=capacity, give_up=give_up))
        record = replay_record(trace_name, len(trace.jobs), result.as_dict(), wall, cpu)
        team_p95[capacity] = {team: _finite(p95) for team, p95 in team_p95_waits_h(result.figures).items()}
        record.update(figure="capacity_probe", team_p95_wait_hours=team_p95[capacity],
                      stopped_early_s=result.figures.get("stopped_early_s"))
        emit(record)
        return value_of(result.figures)

    try:
        search = smallest_capacity(measure, low=low, high=high, step=step, target=target_p95_h)
    except TargetUnreachable as error:
        emit({"figure": "capacity_for_p95_wait", "trace": trace_name, "jobs": len(trace.jobs), "policy": policy,
              "target": target, "target_p95_wait_hours": target_p95_h, "capacity_gpus": None, "error": str(error)})
        return
    emit({"figure": "capacity_for_p95_wait", "trace": trace_name, "jobs": len(trace.jobs), "policy": policy,
          "target": target, "target_p95_wait_hours": target_p95_h, "capacity_gpus": search.capacity_gpus,
          "largest_probed_failing_gpus": search.largest_failing_gpus, "step_gpus": step, "early_stop": early_stop,
          "team_p95_wait_hours_at_answer": team_p95[search.capacity_gpus],
          "probes": [[capacity, _finite(value)] for capacity, value in search.probes],
          "cpu_time_s": round(time.process_time() - started_cpu, 1)})


def _first_jobs(trace: Trace, jobs: int | None) -> Trace:
    """The trace's first ``jobs`` jobs by submission (all of them for None)."""
    if jobs is None:
        return trace
    kept = tuple(sorted(trace.jobs, key=lambda job: job.submit_s)[:jobs])
    return replace(trace, name=f"{trace.name}[:{jobs}]", jobs=kept)


def _finite(value: float) -> float | None:
    """JSON has no infinity: an infinite wait (rejected or never-started jobs at the percentile) is null."""
    return None if math.isinf(value) else round(value, 3)


def _round(value: float | None, digits: int = 2) -> float | None:
    return None if value is None else round(value, digits)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="packing with seed 42 only")
    parser.add_argument("--only", choices=("packing", "replay", "capacity"), action="append",
                        help="run only these parts (repeatable); default: packing and replay")
    parser.add_argument("--seeds", default=None, help="comma-separated packing seeds (default 42..51)")
    parser.add_argument("--policies", default=None, help="comma-separated packing or replay policies")
    parser.add_argument("--fleet", default=None,
                        help="packing: node list replacing openb's (e.g. Alibaba 2026 spot-GPU node_info_df.csv)")
    parser.add_argument("--trace", default="philly", help="replay trace (default philly; philly-demo is small)")
    parser.add_argument("--capacity", type=int, default=None, help="replay fleet GPUs (default 2x mean demand)")
    parser.add_argument("--search", default="752,1504", help="capacity search bracket low,high in GPUs")
    parser.add_argument("--step", type=int, default=32, help="capacity search resolution in GPUs (multiple of 8)")
    parser.add_argument("--target", choices=TARGETS, default="fleet",
                        help="capacity search: p95 of all started jobs, or of every team counting rejected jobs")
    parser.add_argument("--target-hours", type=float, default=1.0, help="capacity search p95 wait bound in hours")
    parser.add_argument("--jobs", type=int, default=None, help="capacity search: only the trace's first N jobs")
    parser.add_argument("--exact-probes", action="store_true",
                        help="capacity search: run every probe to the end (no early stop once the target is missed)")
    args = parser.parse_args()
    parts = args.only or ["packing", "replay"]
    started = time.perf_counter()
    if "packing" in parts:
        seeds = tuple(int(s) for s in args.seeds.split(",")) if args.seeds else FGD_SEEDS
        policies = tuple(args.policies.split(",")) if args.policies else PACKING_POLICIES
        unknown = set(policies) - set(POLICIES)
        if unknown:
            parser.error(f"packing policies are the engine's: {', '.join(POLICIES)}")
        packing(seeds[:1] if args.quick else seeds, policies, args.fleet)
    replay_policies = tuple(args.policies.split(",")) if args.policies and "packing" not in parts else REPLAY_POLICIES
    if "replay" in parts:
        replay(args.trace, replay_policies, args.capacity)
    if "capacity" in parts:
        low, high = (int(value) for value in args.search.split(","))
        for policy in replay_policies:
            capacity_for_wait(args.trace, policy, low, high, args.step, args.target_hours, args.target,
                              jobs=args.jobs, early_stop=not args.exact_probes)
    emit({"figure": "benchmark_wall_time_s", "value": round(time.perf_counter() - started, 1)})


if __name__ == "__main__":
    main()
