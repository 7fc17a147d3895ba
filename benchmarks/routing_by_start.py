"""Routing by predicted start against pools holding 10,000 queued workloads: CPU seconds.

Three pools (Slurm 64 nodes, Kubernetes 64 nodes, Ray 32 nodes of 8 GPUs, leaf switches of 16 nodes)
run mostly full with known ends, and their queues hold 10,000 workloads between them (1 to 64 GPUs,
seeded). The timed part is ``route_by_start`` deciding for ``--arrivals`` new workloads of mixed shape
against the same snapshots, each an estimate per pool (EASY backfill over that pool's queue up to the
workload, then a GPU-count drain), twice: alone (a fresh plan per decision, as one API call pays) and as a
stream sharing one ``StartPlans`` (each pool's pass stopped once per priority level; the webhook's and a
batch's case); the stream's decisions are checked equal to the lone ones. Prints one JSON line; the issue's
target is routing 10,000 workloads against 10,000 queued <= 1 s CPU.

    python benchmarks/routing_by_start.py [--queued 10000] [--arrivals 10000] [--alone 20]
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
from scheduling.engine.startplan import PoolSnapshot, StartPlans  # noqa: E402
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
    parser.add_argument("--arrivals", type=int, default=10_000, help="workloads routed as one stream")
    parser.add_argument("--alone", type=int, default=20, help="of those, how many are also routed one by one")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    share = args.queued // len(POOLS)
    pools = [pool(name, nodes, share, rng) for name, nodes in POOLS]
    arrivals = [Request(f"new{k}", members=m, gpus_per_member=p, team=f"team{k % 5}",
                        kind=rng.choice(list(WorkloadKind)), duration_estimate_s=rng.uniform(600, 36_000),
                        priority=rng.randint(0, 3))
                for k, (m, p) in enumerate(rng.choice(SHAPES) for _ in range(args.arrivals))]
    started = time.process_time()
    alone = [route_by_start(workload, pools, now=0.0) for workload in arrivals[:args.alone]]
    alone_cpu = time.process_time() - started
    plans = StartPlans(0.0)
    started = time.process_time()
    stream = [route_by_start(workload, pools, now=0.0, plans=plans) for workload in arrivals]
    stream_cpu = time.process_time() - started
    if stream[:args.alone] != alone:
        raise SystemExit("the stream's decisions differ from the lone ones")
    chosen: dict[str, int] = {}
    for decision in stream:
        chosen[decision.orchestrator] = chosen.get(decision.orchestrator, 0) + 1
    print(json.dumps({
        "benchmark": "routing_by_start", "queued": share * len(POOLS), "pools": len(POOLS),
        "alone": {"decisions": args.alone, "cpu_ms_per_decision": round(1000 * alone_cpu / max(1, args.alone), 2)},
        "stream": {"decisions": args.arrivals, "cpu_s": round(stream_cpu, 3),
                   "cpu_ms_per_decision": round(1000 * stream_cpu / args.arrivals, 3)},
        "target_cpu_s_for_10000": 1.0, "same_decisions": True, "chosen": chosen,
    }))


if __name__ == "__main__":
    main()
