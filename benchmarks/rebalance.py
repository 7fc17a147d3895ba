"""Rebalancer figures: the week replay (static split vs rebalancing) and the engine's planning time.

Prints JSON lines: one per simulated policy, then the wall time of ``plan_rebalance`` on a 1,250-node
(10,000-GPU) fleet with 6,000 running workloads and 2,000 pending ones.
"""

import json
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from scheduling.engine.rebalance import PendingItem, PoolDemand, plan_rebalance
from scheduling.engine.types import MemberAssignment, Node, RunningWorkload
from scheduling.simulation import rebalance_week


def week() -> None:
    started = time.perf_counter()
    results = rebalance_week.run(seed=7)
    wall = time.perf_counter() - started
    for result in results:
        print(json.dumps({"bench": "rebalance_week", **result.__dict__, "wall_s_both": round(wall, 2)}))


def planning() -> None:
    rng = random.Random(1)
    pools = ("slurm", "k8s", "ray")
    nodes = [Node(f"n{i:05d}", 8, "H100", orchestrator=pools[i % 3]) for i in range(1250)]
    running = [
        RunningWorkload(f"w{i}", "t", 1.0, (MemberAssignment(0, f"n{rng.randrange(1250):05d}", (0,)),),
                        started_at=rng.uniform(0, 3600))
        for i in range(6000)
    ]
    queued = {"slurm": 1500, "k8s": 100, "ray": 100}
    demand = {
        p: PoolDemand(p, tuple(PendingItem(rng.choice((1, 8)), 0, rng.uniform(0, 7200)) for _ in range(n)), 2000.0)
        for p, n in queued.items()
    }
    walls = []
    for _ in range(5):
        started = time.perf_counter()
        decision = plan_rebalance(nodes, running, demand, {}, 3600.0)
        walls.append(time.perf_counter() - started)
    print(json.dumps({"bench": "plan_rebalance", "nodes": len(nodes), "running": len(running),
                      "moves": len(decision.moves), "wall_ms_median": round(statistics.median(walls) * 1000, 1)}))


if __name__ == "__main__":
    week()
    planning()
