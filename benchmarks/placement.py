"""Engine speed figures: one JSON object per scenario per line.

    .venv/bin/python benchmarks/placement.py [--quick] [--scenario NAME ...]

Scenarios (goals on one core in brackets):
  single-node   50,000 single-node requests (1/2/4/8 GPUs) onto 5,000 x 8 GPUs, leaf + spine levels,
                kept saturated: each rejection completes the oldest 1% of running jobs. Per policy
                (best-fit >= 8,100/s, fgd >= 2,000/s, p99 <= 5 ms). A decision is observe + place +
                commit; completions and the quality samples (fragmentation, allocation) are untimed.
  gang-burst    20 gangs of 500 x 1 GPU among 1,500 gangs of 2-8 members on 2,048 x 8 GPUs
                (each 500-member gang decided in <= 200 ms).
  fair-share    2,000 queues, 60,000 pending jobs: entitlements + fair-share ordering (<= 1 s).
  preemption    5,000 full nodes of 20,000 low-priority jobs, 5,000 high-priority arrivals, victim
                selection included (>= 570 decisions/s).
Figures are wall clock (decisions_per_s, p50/p99/max_ms) and thread CPU per decision
(cpu_decisions_per_s, cpu_p99_ms): on a shared machine the CPU figures show the engine's own cost.
They are figures for people to read, never test assertions.
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import resource
import sys
import time
from collections import deque
from collections.abc import Callable, Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from scheduling.engine.fairshare import entitlements, order_pending
from scheduling.engine.fragmentation import fragmented_gpus
from scheduling.engine.placement import ClusterState
from scheduling.engine.preemption import RunningSet, apply_victim_plan, select_victims
from scheduling.engine.types import (
    Node,
    Placement,
    Request,
    RunningWorkload,
    TeamSpec,
    VictimPlan,
)

NODES_PER_LEAF = 32
LEAVES_PER_SPINE = 16


def fleet(count: int, model: str = "H100") -> list[Node]:
    """DGX-like 8-GPU hosts, each its own NVLink domain, 32 to a leaf switch, 16 leaves to a spine."""
    return [
        Node(name=f"n{i:05d}", gpu_total=8, gpu_model=model, nvlink_domain=f"n{i:05d}",
             leaf_switch=f"leaf{i // NODES_PER_LEAF}", spine=f"spine{i // (NODES_PER_LEAF * LEAVES_PER_SPINE)}")
        for i in range(count)
    ]


def settle_heap() -> None:
    """Collect, then freeze the set-up objects out of the cyclic GC (what a long-lived engine worker
    would do after loading its fleet), so pauses measure decisions rather than fixture size."""
    gc.collect()
    gc.freeze()


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))] if ordered else 0.0


class Laps:
    """Per-decision wall-clock and thread CPU time. On a shared machine the CPU figures show what the
    engine costs; the wall figures include time the OS gave to other processes."""

    def __init__(self) -> None:
        self.wall: list[float] = []
        self.cpu: list[float] = []
        self._wall = 0.0
        self._cpu = 0.0

    def start(self) -> None:
        self._wall = time.perf_counter()
        self._cpu = time.thread_time()

    def stop(self) -> float:
        elapsed = time.perf_counter() - self._wall
        self.cpu.append(time.thread_time() - self._cpu)
        self.wall.append(elapsed)
        return elapsed


def figures(scenario: str, nodes: int, jobs: int, laps: Laps, **extra: object) -> dict[str, object]:
    wall, cpu = sum(laps.wall), sum(laps.cpu)
    return {
        "scenario": scenario, "nodes": nodes, "jobs": jobs,
        "decisions_per_s": round(len(laps.wall) / wall, 1) if wall else None,
        "p50_ms": round(percentile(laps.wall, 0.50) * 1000, 3),
        "p99_ms": round(percentile(laps.wall, 0.99) * 1000, 3),
        "max_ms": round(max(laps.wall, default=0.0) * 1000, 3),
        "cpu_decisions_per_s": round(len(laps.cpu) / cpu, 1) if cpu else None,
        "cpu_p99_ms": round(percentile(laps.cpu, 0.99) * 1000, 3),
        **extra,
        "peak_rss_mb": round(peak_rss_mb(), 1),
    }


def single_node_requests(count: int, rng: random.Random) -> list[Request]:
    sizes = rng.choices((1, 2, 4, 8), weights=(40, 30, 20, 10), k=count)
    return [Request(f"j{i}", gpus_per_member=size, team=f"team{i % 20}") for i, size in enumerate(sizes)]


def bench_single_node(policy: str, quick: bool) -> dict[str, object]:
    node_count, job_count = (500, 5_000) if quick else (5_000, 50_000)
    state = ClusterState(fleet(node_count))
    requests = single_node_requests(job_count, random.Random(1))
    running: deque[tuple[Placement, Request]] = deque()
    mix = {1: 40, 2: 30, 4: 20, 8: 10}
    settle_heap()
    laps = Laps()
    placed = 0
    fragmentation: list[float] = []
    utilisation: list[float] = []
    for number, request in enumerate(requests):
        laps.start()
        state.observe_request(request)
        result = state.place(request, policy)
        if isinstance(result, Placement):
            state.commit(result, request)
        laps.stop()
        if isinstance(result, Placement):
            running.append((result, request))
            placed += 1
        else:  # a saturated cluster: the oldest 1% of jobs complete, the request stays pending
            for _ in range(max(1, len(running) // 100)):
                state.release(*running.popleft())
        if number % 2_500 == 2_499:  # untimed samples of quality
            fragmentation.append(fragmented_gpus(state.nodes(), mix))
            utilisation.append(1 - state.gpu_free / state.gpu_total)
    return figures(f"single-node/{policy}", node_count, job_count, laps, placed=placed,
                   rejected=job_count - placed,
                   mean_fragmented_gpus=round(sum(fragmentation) / len(fragmentation), 1),
                   mean_allocated=round(sum(utilisation) / len(utilisation), 4))


def bench_gang_burst(policy: str, quick: bool) -> dict[str, object]:
    node_count, big, small = (512, 5, 400) if quick else (2_048, 20, 1_500)
    rng = random.Random(2)
    state = ClusterState(fleet(node_count))
    gangs = [Request(f"big{i}", members=500, gpus_per_member=1) for i in range(big)]
    gangs += [Request(f"g{i}", members=rng.randint(2, 8), gpus_per_member=rng.choice((1, 2, 4, 8)))
              for i in range(small)]
    rng.shuffle(gangs)
    settle_heap()
    laps = Laps()
    big_latencies: list[float] = []
    big_cpu: list[float] = []
    placed_big = 0
    for request in gangs:
        laps.start()
        state.observe_request(request)
        result = state.place(request, policy)
        if isinstance(result, Placement):
            state.commit(result, request)
        elapsed = laps.stop()
        if request.members == 500:
            big_latencies.append(elapsed)
            big_cpu.append(laps.cpu[-1])
            placed_big += isinstance(result, Placement)
    return figures(f"gang-burst/{policy}", node_count, len(gangs), laps,
                   big_gang_max_ms=round(max(big_latencies) * 1000, 3),
                   big_gang_p50_ms=round(percentile(big_latencies, 0.5) * 1000, 3),
                   big_gang_cpu_max_ms=round(max(big_cpu) * 1000, 3),
                   big_gangs_placed=placed_big, gpu_free_after=state.gpu_free)


def bench_fair_share(quick: bool) -> dict[str, object]:
    orgs, teams_per_org, job_count = (10, 20, 6_000) if quick else (40, 50, 60_000)
    rng = random.Random(3)
    teams = [TeamSpec(f"org{o}", weight=rng.choice((1, 2, 5))) for o in range(orgs)]
    leaves = [TeamSpec(f"org{o}/q{q}", parent=f"org{o}", weight=rng.choice((10, 20, 40)),
                       guaranteed=rng.choice((0, 0, 4, 8)), burst_limit=rng.choice((None, 64, 256)))
              for o in range(orgs) for q in range(teams_per_org)]
    teams += leaves
    jobs = [Request(f"j{i}", gpus_per_member=rng.choice((1, 2, 4, 8)), team=rng.choice(leaves).name,
                    priority=rng.randint(0, 3), submitted_at=float(i)) for i in range(job_count)]
    usage = {team.name: rng.uniform(0, 5_000) for team in leaves}
    laps = Laps()
    laps.start()
    demand: dict[str, float] = {}
    for job in jobs:
        demand[job.team] = demand.get(job.team, 0.0) + job.gpus
    result = entitlements(teams, 40_000, demand)
    ordered = order_pending(jobs, usage, {e.team: e for e in result})
    elapsed = laps.stop()
    assert len(ordered) == len(jobs)
    return figures("fair-share", 0, job_count, laps, queues=len(leaves), pass_ms=round(elapsed * 1000, 1),
                   pass_cpu_ms=round(laps.cpu[0] * 1000, 1))


def bench_preemption(quick: bool) -> dict[str, object]:
    node_count, arrivals = (500, 500) if quick else (5_000, 5_000)
    rng = random.Random(4)
    state = ClusterState(fleet(node_count))
    # Teams 0-4 hold most of the fleet, far above their guarantees (borrowers); teams 5-9 sit under
    # theirs, so their arrivals reclaim borrowed capacity first, then preempt by priority.
    gpus = node_count * 8
    teams = [TeamSpec(f"team{t}", weight=10, guaranteed=gpus // 20 if t < 5 else gpus // 10) for t in range(10)]
    running = RunningSet()
    for i in range(node_count * 4):  # four 2-GPU low-priority jobs per node: the fleet is full
        team = f"team{i % 5}" if i % 10 < 7 else f"team{5 + i % 5}"
        request = Request(f"low{i}", gpus_per_member=2, team=team, priority=0)
        placement = state.place(request, "first-fit")
        assert isinstance(placement, Placement)
        state.commit(placement, request)
        running.add(RunningWorkload(f"low{i}", request.team, 2.0, placement.assignments, priority=0,
                                    started_at=rng.uniform(0, 3_000)))
    demand = {f"team{t}": float(gpus) for t in range(10)}
    ents = entitlements(teams, gpus, demand, running.gpus_by_team())
    settle_heap()
    laps = Laps()
    preempted = 0
    victims_total = 0
    for i in range(arrivals):
        request = Request(f"high{i}", gpus_per_member=rng.choice((1, 2, 2, 4, 8)), team=f"team{5 + i % 5}",
                          priority=10)
        laps.start()
        plan = select_victims(state, running, request, ents, now=4_000.0, min_runtime_s=600.0)
        if isinstance(plan, VictimPlan):
            apply_victim_plan(state, running, plan, request, now=4_000.0)
        laps.stop()
        if isinstance(plan, VictimPlan):
            preempted += 1
            victims_total += len(plan.victims)
    return figures("preemption", node_count, arrivals, laps, placed=preempted,
                   victims=victims_total, running=node_count * 4)


SCENARIOS: dict[str, Callable[[bool], Iterator[dict[str, object]]]] = {
    "single-node": lambda quick: (bench_single_node(policy, quick) for policy in ("best-fit", "fgd", "first-fit")),
    "gang-burst": lambda quick: (bench_gang_burst(policy, quick) for policy in ("best-fit", "fgd")),
    "fair-share": lambda quick: iter([bench_fair_share(quick)]),
    "preemption": lambda quick: iter([bench_preemption(quick)]),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="shrink every scenario about tenfold")
    parser.add_argument("--scenario", action="append", choices=sorted(SCENARIOS), help="run only these")
    args = parser.parse_args()
    for name in args.scenario or list(SCENARIOS):
        for line in SCENARIOS[name](args.quick):
            print(json.dumps(line), flush=True)


if __name__ == "__main__":
    main()
