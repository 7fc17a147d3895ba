"""The gpu-priority-expander's cost per cluster-autoscaler call: ``services.expander.choose`` on the 1,000-node,
5,000-workload benchmark federation (benchmarks/_fleet_fixture.py). Each call re-reads the last round and
recomputes the rebalancer's targets (``rebalance.decide_now``), so this is what one scale-up question costs the
portal. Prints one JSON line: calls, wall p50/p95 and CPU per call (process time: the machine is shared).
On a throwaway SQLite file, or on $BENCH_DATABASE_URL (an empty database you own) when set.
"""

import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._django import throwaway_django

CALLS = 30


def main() -> None:
    vendor = throwaway_django("expander")
    from benchmarks._fleet_fixture import client_users
    from scheduling.engine.expander import GrowthOption, PodAsk
    from scheduling.services.expander import choose

    client_users(1)  # builds the federation the first time
    gang = tuple(PodAsk(8.0, priority=100) for _ in range(4))
    options = [
        GrowthOption(f"{pool}-h100", 4, 8, pool, "H100", gang) for pool in ("bench-slurm", "bench-k8s", "bench-ray")
    ]
    walls, cpus = [], []
    for _ in range(CALLS):
        wall, cpu = time.perf_counter(), time.process_time()
        choose(options, autoscaler="bench", default_pool="bench-k8s")
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
    walls.sort()
    print(json.dumps({
        "bench": "expander_choose", "database": vendor, "calls": CALLS,
        "wall_ms_p50": round(statistics.median(walls) * 1000, 1),
        "wall_ms_p95": round(walls[int(0.95 * (CALLS - 1))] * 1000, 1),
        "cpu_ms_mean": round(statistics.mean(cpus) * 1000, 1),
        "load": os.getloadavg()[0],
    }))  # fmt: skip


if __name__ == "__main__":
    main()
