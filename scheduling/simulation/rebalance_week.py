"""A week of the shared fleet with the issue's time-of-day pattern: static split vs rebalanced federation.

Workload (seeded, synthetic, shaped like the issue's story):
* **Slurm** training gangs of 1-4 whole 8-GPU nodes, 2-6 h, flooding on weekday mornings (08-11:
  about 128 GPUs of demand at 9 AM), a trickle otherwise;
* **Ray** sweeps of 1-GPU trials lasting 10-40 min, ~192 GPUs of concurrent demand overnight (20-07),
  ~40 by day;
* **Kubernetes** inference replicas of 1-2 GPUs lasting 1-3 h, ~40 GPUs in weekday business hours
  (a guaranteed floor of 32, the rest bursting), ~12 at night and at weekends.

Every orchestrator schedules its own nodes first-come-first-served with skipping (whole free nodes for
gangs, best fit for single-node jobs). *Static* keeps the initial split; *federated* runs the engine's
rebalancer every 15 minutes under the pool-policy calendar (inference floor 32 on weekdays 08-20,
floors of 16 for Slurm and Ray), draining nodes before handing them over. Reported: fleet utilisation
(busy GPU-hours / capacity GPU-hours), p95 queue wait per orchestrator, and inference floor breaches
(5-minute steps in the floor's window where Kubernetes could schedule on fewer than 32 GPUs).

No Django: run ``python -m scheduling.simulation.rebalance_week`` (or ``benchmarks/rebalance.py``).
"""

from __future__ import annotations

import json
import math
import random
import sys
from collections import defaultdict
from dataclasses import dataclass, field

from scheduling.engine.calendar import PolicyRule, bounds_ahead
from scheduling.engine.rebalance import PendingItem, PoolDemand, RebalanceConfig, plan_rebalance
from scheduling.engine.types import MemberAssignment, RunningWorkload
from scheduling.engine.types import Node as EngineNode

STEP_S = 300
WEEK_S = 7 * 24 * 3600
GPUS_PER_NODE = 8
POOLS = ("slurm", "k8s", "ray")
STATIC_NODES = {"slurm": 12, "k8s": 6, "ray": 14}  # 256 GPUs
INFERENCE_FLOOR = 32
WEEKDAYS = frozenset({1, 2, 3, 4, 5})
ALL_DAYS = frozenset(range(1, 8))
RULES = (
    PolicyRule("inference business hours", "k8s", WEEKDAYS, 8 * 60, 20 * 60, INFERENCE_FLOOR, precedence=10),
    PolicyRule("inference base", "k8s", ALL_DAYS, 0, 0, 8),
    PolicyRule("slurm base", "slurm", ALL_DAYS, 0, 0, 16),
    PolicyRule("ray base", "ray", ALL_DAYS, 0, 0, 16),
)


@dataclass
class Job:
    id: int
    pool: str
    nodes: int  # whole nodes (gangs); 0 for a single-node job of ``gpus``
    gpus: int
    duration_s: float
    submitted_at: float
    priority: int = 0
    started_at: float | None = None
    placed: list[tuple[str, int]] = field(default_factory=list)


@dataclass
class SimNode:
    name: str
    owner: str
    free: int = GPUS_PER_NODE
    draining_to: str | None = None
    drain_started: float = 0.0


def _local(t: float) -> tuple[int, int]:
    """Simulation time 0 is Monday 00:00 in the portal's time zone."""
    day, seconds = divmod(int(t), 24 * 3600)
    return day % 7 + 1, seconds // 60


def _rate(pool: str, weekday: int, minute: int) -> float:
    """Target concurrent GPUs of demand for the pool at that local time."""
    hour, weekday_work = minute / 60, weekday in WEEKDAYS
    if pool == "slurm":
        return 150.0 if weekday_work and 8 <= hour < 11 else 40.0 if weekday_work and 11 <= hour < 18 else 20.0
    if pool == "ray":
        return 192.0 if hour >= 20 or hour < 7 else 40.0
    return 40.0 if weekday_work and 8 <= hour < 20 else 12.0


def generate(seed: int) -> list[Job]:
    """Arrivals with Little's law: rate = wanted concurrency / mean duration."""
    rng = random.Random(seed)
    jobs: list[Job] = []
    shapes = {"slurm": (4 * 3600.0, 16.0), "ray": (25 * 60.0, 1.0), "k8s": (2 * 3600.0, 1.5)}
    for t in range(0, WEEK_S, STEP_S):
        weekday, minute = _local(t)
        for pool in POOLS:
            mean_s, mean_gpus = shapes[pool]
            expected = _rate(pool, weekday, minute) / (mean_s * mean_gpus) * STEP_S
            for _ in range(_poisson(rng, expected)):
                at = t + rng.uniform(0, STEP_S)
                if pool == "slurm":
                    nodes = rng.choice((1, 1, 2, 2, 3, 4))
                    job = Job(len(jobs), pool, nodes, nodes * GPUS_PER_NODE, rng.uniform(2, 6) * 3600 / 2.5, at, 10)
                elif pool == "ray":
                    job = Job(len(jobs), pool, 0, 1, rng.uniform(10, 40) * 60, at)
                else:
                    job = Job(len(jobs), pool, 0, rng.choice((1, 2)), rng.uniform(1, 3) * 3600, at, 50)
                jobs.append(job)
    jobs.sort(key=lambda j: j.submitted_at)
    return jobs


def _poisson(rng: random.Random, mean: float) -> int:
    limit, count, product = math.exp(-mean), 0, rng.random()
    while product > limit:
        count += 1
        product *= rng.random()
    return count


@dataclass
class Result:
    policy: str
    utilisation: float
    p95_wait_min: dict[str, float]
    floor_breach_steps: int
    moves: int
    unstarted: dict[str, int]


def _schedule(pool: str, queue: list[Job], nodes: list[SimNode], now: float, running: list[Job]) -> None:
    usable = [n for n in nodes if n.owner == pool and n.draining_to is None]
    started = []
    for job in queue[:400]:
        if job.nodes:
            empty = [n for n in usable if n.free == GPUS_PER_NODE]
            if len(empty) < job.nodes:
                continue
            chosen = [(n, GPUS_PER_NODE) for n in empty[: job.nodes]]
        else:
            fits = [n for n in usable if n.free >= job.gpus]
            if not fits:
                continue
            chosen = [(min(fits, key=lambda n: (n.free, n.name)), job.gpus)]
        for node, gpus in chosen:
            node.free -= gpus
        job.placed = [(n.name, g) for n, g in chosen]
        job.started_at = now
        started.append(job)
    for job in started:
        queue.remove(job)
        running.append(job)


def simulate(jobs: list[Job], federated: bool, config: RebalanceConfig | None = None) -> Result:
    config = config or RebalanceConfig(max_moves=4, hold_s=1800)
    nodes = [SimNode(f"{pool}{i:02d}", pool) for pool in POOLS for i in range(STATIC_NODES[pool])]
    by_name = {n.name: n for n in nodes}
    fresh = [Job(j.id, j.pool, j.nodes, j.gpus, j.duration_s, j.submitted_at, j.priority) for j in jobs]
    queues: dict[str, list[Job]] = defaultdict(list)
    running: list[Job] = []
    done: list[Job] = []
    busy_gpu_s = 0.0
    breaches = moves = 0
    last_change: dict[str, float] = {}
    cursor = 0
    for t in range(0, WEEK_S, STEP_S):
        now = float(t + STEP_S)
        for job in [r for r in running if r.started_at is not None and r.started_at + r.duration_s <= now]:
            running.remove(job)
            done.append(job)
            for name, gpus in job.placed:
                by_name[name].free += gpus
        while cursor < len(fresh) and fresh[cursor].submitted_at < now:
            queues[fresh[cursor].pool].append(fresh[cursor])
            cursor += 1
        if federated:
            moves += _finish_drains(nodes, now, last_change)
            if t % 900 == 0:
                _rebalance(nodes, queues, running, now, config, last_change)
        for pool in POOLS:
            _schedule(pool, queues[pool], nodes, now, running)
        busy_gpu_s += sum(g for r in running for _n, g in r.placed) * STEP_S
        weekday, minute = _local(now)
        if weekday in WEEKDAYS and 8 * 60 <= minute < 20 * 60:
            k8s = sum(GPUS_PER_NODE for n in nodes if n.owner == "k8s" and n.draining_to is None)
            breaches += k8s < INFERENCE_FLOOR
    waits: dict[str, list[float]] = defaultdict(list)
    for job in [*done, *running]:
        if job.started_at is not None:
            waits[job.pool].append(job.started_at - job.submitted_at)
    for pool, queue in queues.items():
        waits[pool].extend(WEEK_S - j.submitted_at for j in queue)
    return Result(
        "federated (rebalancing)" if federated else "static split",
        round(busy_gpu_s / (len(nodes) * GPUS_PER_NODE * WEEK_S), 4),
        {p: round(_p95(waits[p]) / 60, 1) for p in POOLS},
        breaches,
        moves,
        {p: len(queues[p]) for p in POOLS},
    )


def _p95(values: list[float]) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, math.ceil(0.95 * len(ordered)) - 1)]


def _finish_drains(nodes: list[SimNode], now: float, last_change: dict[str, float]) -> int:
    moved = 0
    for node in nodes:
        if node.draining_to is None:
            continue
        if node.free == GPUS_PER_NODE:
            last_change[node.owner] = last_change[node.draining_to] = now
            node.owner, node.draining_to = node.draining_to, None
            moved += 1
        elif now - node.drain_started > 2 * 3600:  # drain timeout: roll back to the source
            node.draining_to = None
    return moved


def _rebalance(
    nodes: list[SimNode], queues: dict[str, list[Job]], running: list[Job], now: float, config: RebalanceConfig,
    last_change: dict[str, float],
) -> None:
    engine_nodes = [
        EngineNode(n.name, GPUS_PER_NODE, "H100", orchestrator=n.owner, schedulable=n.draining_to is None)
        for n in nodes
    ]
    work = [
        RunningWorkload(
            str(j.id), "", float(j.gpus),
            tuple(MemberAssignment(i, name, tuple(range(g))) for i, (name, g) in enumerate(j.placed)),
            started_at=j.started_at or 0.0, preemptible=len(j.placed) <= 1,
            expected_end=(j.started_at or 0.0) + j.duration_s,
        )
        for j in running
    ]
    allocated: dict[str, float] = defaultdict(float)
    owners = {n.name: n.owner for n in nodes}
    for j in running:
        allocated[owners[j.placed[0][0]] if j.placed else j.pool] += j.gpus
    demand = {
        p: PoolDemand(p, tuple(PendingItem(j.gpus, j.priority, now - j.submitted_at) for j in queues[p]), allocated[p])
        for p in POOLS
    }
    weekday, minute = _local(now)
    bounds = bounds_ahead(RULES, weekday, minute, 60)
    held = {p: now - at for p, at in last_change.items()}
    decision = plan_rebalance(engine_nodes, work, demand, bounds, now, config, held)
    by_name = {n.name: n for n in nodes}
    for move in decision.moves:
        node = by_name[move.node]
        node.draining_to, node.drain_started = move.target, now


def run(seed: int = 7) -> list[Result]:
    jobs = generate(seed)
    return [simulate(jobs, federated=False), simulate(jobs, federated=True)]


def markdown_table(results: list[Result]) -> str:
    lines = [
        "| policy | utilisation | p95 wait Slurm (min) | p95 wait Kubernetes (min) | p95 wait Ray (min) "
        "| inference floor breaches | node moves |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in results:
        lines.append(
            f"| {r.policy} | {r.utilisation:.1%} | {r.p95_wait_min['slurm']} | {r.p95_wait_min['k8s']} "
            f"| {r.p95_wait_min['ray']} | {r.floor_breach_steps} | {r.moves} |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    seed = int(sys.argv[1]) if len(sys.argv) > 1 else 7
    results = run(seed)
    for result in results:
        print(json.dumps(result.__dict__))
    print(markdown_table(results))
