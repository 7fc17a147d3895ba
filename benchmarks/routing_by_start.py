"""Routing by predicted start against pools holding 10,000 queued workloads: CPU seconds.

Three pools (Slurm 64 nodes, Kubernetes 64 nodes, Ray 32 nodes of 8 GPUs, leaf switches of 16 nodes)
run mostly full with known ends, and their queues hold 10,000 workloads between them (1 to 64 GPUs,
seeded). The timed part is ``route_by_start`` deciding for ``--arrivals`` new workloads of mixed shape,
each an estimate per pool (EASY backfill over that pool's queue up to the workload, then a GPU-count
drain). Prints one JSON line; the issue's target is routing against 10,000 queued workloads <= 1 s CPU.

    python benchmarks/routing_by_start.py [--queued 10000] [--arrivals 20]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from scheduling.engine.routing import route_by_start  # noqa: E402
from scheduling.engine.startplan import PoolSnapshot  # noqa: E402
from scheduling.engine.types import MemberAssignment, Node, Request, RunningWorkload, WorkloadKind  # noqa: E402

POOLS = (("slurm", 64), ("kubernetes", 64), ("ray", 32))
SHAPES = ((1, 1), (1, 2), (1, 4), (1, 8), (2, 8), (4, 8), (8, 8))


def pool(name: str, nodes: int, queued: int, rng: random.Random) -> PoolSnapshot:
    """Every node busy except a few GPUs here and there; one running job per node with a known end."""
    engine_nodes, running = [], []
    for i in range(nodes):
        busy = 8 if rng.random() < 0.8 else rng.choice((4, 6, 7))
        engine_nodes.append(Node(f"{name}{i}", 8, "H100", (0,) * busy + (1000,) * (8 - busy),
                                 nvlink_domain=f"{name}{i}", leaf_switch=f"{name}-leaf{i // 16}"))
        running.append(RunningWorkload(f"{name}-run{i}", f"team{i % 5}", float(busy),
                                       (MemberAssignment(0, f"{name}{i}", tuple(range(busy))),),
                                       expected_end=rng.uniform(60, 86_400)))
    queue = []
    for j in range(queued):
        members, per = rng.choice(SHAPES)
        queue.append(Request(f"{name}-q{j}", members=members, gpus_per_member=per, team=f"team{j % 5}",
                             duration_estimate_s=rng.uniform(600, 86_400), priority=rng.randint(0, 3)))
    queue.sort(key=lambda r: -r.priority)
    return PoolSnapshot(name, tuple(engine_nodes), tuple(queue), tuple(running))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queued", type=int, default=10_000)
    parser.add_argument("--arrivals", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    share = args.queued // len(POOLS)
    pools = [pool(name, nodes, share, rng) for name, nodes in POOLS]
    arrivals = [Request(f"new{k}", members=m, gpus_per_member=p, team=f"team{k % 5}",
                        kind=rng.choice(list(WorkloadKind)), duration_estimate_s=rng.uniform(600, 36_000),
                        priority=rng.randint(0, 3))
                for k, (m, p) in enumerate(rng.choice(SHAPES) for _ in range(args.arrivals))]
    chosen: dict[str, int] = {}
    started = time.process_time()
    for workload in arrivals:
        decision = route_by_start(workload, pools, now=0.0)
        chosen[decision.orchestrator] = chosen.get(decision.orchestrator, 0) + 1
    cpu = time.process_time() - started
    print(json.dumps({
        "benchmark": "routing_by_start", "queued": share * len(POOLS), "pools": len(POOLS),
        "arrivals": args.arrivals, "cpu_s": round(cpu, 3), "cpu_ms_per_decision": round(1000 * cpu / args.arrivals, 2),
        "target_cpu_s_per_decision": 1.0, "chosen": chosen,
    }))


if __name__ == "__main__":
    main()
