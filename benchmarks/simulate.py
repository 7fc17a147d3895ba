"""Simulator figures as JSON lines: FGD packing reproduction, Philly replay, speed.

    .venv/bin/python benchmarks/simulate.py            # full: 3 policies x 10 seeds, full Philly runs
    .venv/bin/python benchmarks/simulate.py --quick    # one seed, the demo Philly slice
    .venv/bin/python benchmarks/simulate.py --capacity-search   # also the capacity for p95 wait <= 1 h

Needs ../shared/traces (openb is read from there, never copied). Prints one JSON object per line.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from scheduling.simulation import FGD_SEEDS, simulate_packing, simulate_replay
from scheduling.traces import load_trace

PUBLISHED_AT_100 = {"random": 86.25, "best-fit": 92.91, "fgd": 95.23}
HOUR = 3600.0


def emit(record: dict[str, object]) -> None:
    print(json.dumps(record), flush=True)


def packing(seeds: tuple[int, ...], policies: tuple[str, ...]) -> None:
    trace = load_trace("openb-default")
    for policy in policies:
        runs = [simulate_packing(trace, policy, seed=seed) for seed in seeds]
        at_100 = [run.at(100) or 0.0 for run in runs]
        emit(
            {
                "figure": "fgd_packing",
                "trace": "openb_pod_list_default",
                "policy": policy,
                "seeds": list(seeds),
                "allocation_at_100_median": statistics.median(at_100),
                "allocation_at_100": at_100,
                "published_median": PUBLISHED_AT_100.get(policy),
                "fragmentation_pct_at_75_median": statistics.median(run.fragmentation_pct[75] or 0.0 for run in runs),
                "wall_time_s_max": max(run.wall_time_s for run in runs),
            }
        )


def replay(trace_name: str, policies: tuple[str, ...], capacity: int | None) -> None:
    trace = load_trace(trace_name)
    for policy in policies:
        figures = simulate_replay(trace, policy, capacity_gpus=capacity).as_dict()
        waits = figures["wait_hours"]
        emit(
            {
                "figure": "replay",
                "trace": trace_name,
                "jobs": len(trace.jobs),
                "policy": policy,
                "capacity_gpus": figures["capacity_gpus"],
                "allocation": figures["allocation"],
                "utilisation": figures["utilisation"],
                "wait_hours": {bucket: {q: waits[bucket][q] for q in ("p50", "p95", "p99")} for bucket in waits},
                "jct_hours_mean": figures["jct_hours"]["all"]["mean"],
                "jain_fairness": figures["jain_fairness"],
                "preemptions": figures["preemptions"],
                "node_moves": figures["node_moves"],
                "pools": figures["pools"],
                "wall_time_s": figures["wall_time_s"],
            }
        )


def capacity_for_wait(trace_name: str, policy: str, target_p95_h: float = 1.0, step: int = 64) -> None:
    """Smallest capacity (multiple of ``step`` GPUs) whose overall p95 queue wait is within target."""
    trace = load_trace(trace_name)
    low, high = step, step
    while _p95(trace, policy, high) > target_p95_h:
        low, high = high, high * 2
    while high - low > step:
        middle = (low + high) // 2 // step * step
        if _p95(trace, policy, middle) > target_p95_h:
            low = middle
        else:
            high = middle
    emit(
        {
            "figure": "capacity_for_p95_wait",
            "trace": trace_name,
            "policy": policy,
            "target_p95_wait_hours": target_p95_h,
            "capacity_gpus": high,
        }
    )


def _p95(trace: object, policy: str, capacity: int) -> float:
    figures = simulate_replay(trace, policy, capacity_gpus=capacity).as_dict()  # type: ignore[arg-type]
    return figures["wait_hours"]["all"]["p95"] or 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="one seed, the demo Philly slice")
    parser.add_argument("--capacity-search", action="store_true", help="find the capacity for p95 wait <= 1 h")
    parser.add_argument("--capacity", type=int, default=None, help="Philly fleet GPUs (default 2x mean demand)")
    args = parser.parse_args()
    started = time.perf_counter()
    packing(FGD_SEEDS[:1] if args.quick else FGD_SEEDS, ("random", "best-fit", "fgd"))
    trace = "philly-demo" if args.quick else "philly"
    replay(trace, ("siloed", "federated", "best-fit"), args.capacity)
    if args.capacity_search:
        for policy in ("siloed", "federated"):
            capacity_for_wait(trace, policy)
    emit({"figure": "benchmark_wall_time_s", "value": time.perf_counter() - started})


if __name__ == "__main__":
    main()
