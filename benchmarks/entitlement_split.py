"""The entitlement split's CPU time: 500 teams (50 x 10: a parent and 9 sub-teams) x 10 orchestrators.

Goal (issue #31): <= 50 ms CPU for one split. Each team has an any-model queue, 200 grants are in force (a
quarter of them naming one orchestrator), every team has demand (running + pending) on 3 of the 10
orchestrators; the second figure is a round with the previous split (hysteresis) after 10 % of the demands
moved. Prints one JSON line; CPU time is process time (the machine is shared), the median of 7 runs, with the
machine's 1-minute load average (CPU time still grows with load on a shared 2-core box: caches, frequency).
"""

import json
import os
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from scheduling.engine.entitlement_split import Demand, Supply, split_entitlements
from scheduling.engine.governance_state import GovernanceInput, GovGrant, GovQueue, GovTeam
from scheduling.engine.types import OrchestratorKind

KINDS = (OrchestratorKind.SLURM, OrchestratorKind.KUBERNETES, OrchestratorKind.RAY)


def fleet(seed: int = 7):
    rng = random.Random(seed)
    supply = [Supply(f"o{i}", KINDS[i % 3], "", 512) for i in range(10)]
    teams, queues = [], []
    for p in range(50):
        teams.append(GovTeam(f"p{p}"))
        queues.append(GovQueue(f"p{p}", 2.0, 90, 180))
        for c in range(9):
            teams.append(GovTeam(f"p{p}c{c}", f"p{p}"))
            queues.append(GovQueue(f"p{p}c{c}", 11.0, 10, 30))
    grants = [
        GovGrant(t.slug, 4, 0.0, 2e9, orchestrator=rng.choice(supply).orchestrator if i % 4 == 0 else "")
        for i, t in enumerate(rng.sample(teams, 200))
    ]
    demand = [
        Demand(t.slug, o.orchestrator, "", rng.randint(0, 8), rng.randint(0, 16))
        for t in teams
        if t.parent
        for o in rng.sample(supply, 3)
    ]
    return GovernanceInput(tuple(teams), tuple(queues), tuple(grants)), supply, demand, rng


def cpu(fn) -> float:
    start = time.process_time()
    fn()
    return time.process_time() - start


def main() -> None:
    data, supply, demand, rng = fleet()
    first = split_entitlements(data, 1e9, supply, demand)
    moved = [Demand(d.team, d.orchestrator, "", d.running, d.pending + 20) if rng.random() < 0.1 else d for d in demand]
    cold = [cpu(lambda: split_entitlements(data, 1e9, supply, demand)) for _ in range(7)]
    warm = [cpu(lambda: split_entitlements(data, 1e9, supply, moved, first)) for _ in range(7)]
    print(
        json.dumps(
            {
                "benchmark": "entitlement_split",
                "teams": len(data.teams),
                "orchestrators": len(supply),
                "grants": len(data.grants),
                "demands": len(demand),
                "shares": len(first.shares),
                "split_cpu_ms": round(statistics.median(cold) * 1000, 1),
                "split_with_previous_cpu_ms": round(statistics.median(warm) * 1000, 1),
                "goal_ms": 50,
                "load_avg_1m": round(os.getloadavg()[0], 2),
            }
        )
    )


if __name__ == "__main__":
    main()
