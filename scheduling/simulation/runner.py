"""Entry points: build pools for a policy, run a trace, return JSON-ready figures.

Policies (``--policy``):

* ``siloed``: the fleet split into fixed Slurm / Kubernetes / Ray partitions sized by each
  orchestrator's share of the trace's GPU-hours (every partition at least as big as its largest job);
  Slurm: exclusive nodes + EASY backfill, best-fit; Kubernetes: greedy queue, best-fit pods; Ray:
  strict FCFS, first-fit.
* ``federated``: one shared pool with FGD placement, EASY backfill for the queue head, fair-share queue
  order, preemption of borrowed capacity and node hand-overs between orchestrators (see federation.py).
* any engine placement policy (``best-fit``, ``first-fit``, ``fgd``, ``random``): one shared pool, EASY
  backfill, that placement policy, no fair share or preemption.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from scheduling.engine.placement import POLICIES
from scheduling.simulation.federation import Federation
from scheduling.simulation.fleet import GPUS_PER_NODE, build_fleet, split_nodes
from scheduling.simulation.packing import FGD_SEEDS, PackingResult, run_packing
from scheduling.simulation.pool_file import PoolFileError, plan_pools
from scheduling.simulation.pools import PoolSpec
from scheduling.simulation.progress import ProgressCallback
from scheduling.simulation.replay import Replay
from scheduling.simulation.results import ReplayResult
from scheduling.simulation.scenario import Scenario, build_scenario
from scheduling.traces.records import Trace, TraceJob
from scheduling.wording import plural

POLICY_NAMES = ("siloed", "federated", *POLICIES)
MODES = ("packing", "replay")
DEFAULT_CAPACITY_FACTOR = 2.0


def default_capacity(jobs: Sequence[TraceJob], gpus_per_node: int = GPUS_PER_NODE) -> int:
    """Twice the mean GPU demand over the arrival window, in whole nodes (a documented default)."""
    if not jobs:
        return gpus_per_node
    window = max(job.submit_s for job in jobs) - min(job.submit_s for job in jobs)
    gpu_s = sum(job.gpus * (job.duration_s or 0.0) for job in jobs)
    mean = gpu_s / window if window > 0 else max(job.gpus for job in jobs)
    nodes = max(1, -(-int(DEFAULT_CAPACITY_FACTOR * mean) // gpus_per_node))
    return nodes * gpus_per_node


def pools_for(
    policy: str, nodes: Sequence[Any], scenario: Scenario, jobs: Sequence[TraceJob], *, slurm_exclusive: bool = True
) -> list[PoolSpec]:
    if policy == "siloed":
        return siloed_pools(nodes, scenario, jobs, slurm_exclusive=slurm_exclusive)
    if policy == "federated":
        return [
            PoolSpec(
                "shared", tuple(nodes), discipline="easy", placement_policy="fgd", preemption=True, queue="fairshare"
            )
        ]
    if policy in POLICIES:
        return [PoolSpec("shared", tuple(nodes), discipline="easy", placement_policy=policy)]
    raise ValueError(f"unknown policy {policy!r}; expected one of {', '.join(POLICY_NAMES)}")


def siloed_pools(
    nodes: Sequence[Any], scenario: Scenario, jobs: Sequence[TraceJob], *, slurm_exclusive: bool
) -> list[PoolSpec]:
    per_node = max(node.gpu_total for node in nodes)
    largest: dict[str, int] = {}
    for job in jobs:
        orchestrator = scenario.orchestrator_for(job)
        need = -(-int(job.gpus) // per_node) if job.gpus else 1
        if orchestrator == "slurm" and slurm_exclusive:
            need = job.request.members
        largest[orchestrator] = max(largest.get(orchestrator, 1), need)
    shares = scenario.demand_share_by_orchestrator()
    split = split_nodes(nodes, shares, minimum=largest)
    native = {
        "slurm": dict(discipline="easy", placement_policy="best-fit", exclusive=slurm_exclusive),
        "kubernetes": dict(discipline="greedy", placement_policy="best-fit"),
        "ray": dict(discipline="fcfs", placement_policy="first-fit"),
    }
    return [PoolSpec(name, tuple(split[name]), **native[name]) for name in split]  # type: ignore[arg-type]


def simulate_replay(
    trace: Trace,
    policy: str,
    *,
    seed: int = 0,
    capacity_gpus: int | None = None,
    gpus_per_node: int = GPUS_PER_NODE,
    slurm_exclusive: bool = True,
    horizon_s: float | None = None,
    progress: ProgressCallback | None = None,
    give_up: Callable[[Replay], bool] | None = None,
) -> ReplayResult:
    """Replay ``trace`` under ``policy``; ``give_up`` may end the run early (see ``Replay``)."""
    jobs = trace.jobs
    if trace.nodes and not capacity_gpus:
        require_gpus(trace.nodes)
    capacity = capacity_gpus or (trace.gpu_capacity if trace.nodes else default_capacity(jobs, gpus_per_node))
    nodes = trace.nodes if trace.nodes and not capacity_gpus else build_fleet(capacity, gpus_per_node=gpus_per_node)
    scenario = build_scenario(jobs, sum(node.gpu_total for node in nodes))
    pools = pools_for(policy, nodes, scenario, jobs, slurm_exclusive=slurm_exclusive)
    federation = Federation() if policy == "federated" else None
    replay = Replay(
        jobs, pools, scenario, policy=policy, seed=seed, federation=federation, horizon_s=horizon_s, progress=progress,
        give_up=give_up,
    )
    result = replay.run()
    result.figures["trace"] = trace.name
    result.figures["rows_skipped"] = trace.rows_skipped
    return result


def simulate_pool_file(
    trace: Trace,
    pool_file: str | Path,
    *,
    seed: int = 0,
    horizon_s: float | None = None,
    skip_unrouted: bool = False,
    progress: ProgressCallback | None = None,
) -> ReplayResult:
    """Replay ``trace`` on its node list split as ``pool_file`` says (see pool_file.py).

    A job that matches no pool raises ``PoolFileError`` naming it (``skip_unrouted``: it is left out and
    counted in ``jobs.skipped_no_pool``).
    """
    if not trace.nodes:
        raise ValueError("--pools needs a fleet: give --fleet FILE.csv (or a trace with a node list)")
    require_gpus(trace.nodes)
    plan = plan_pools(pool_file, trace.nodes)
    scenario = build_scenario(trace.jobs, trace.gpu_capacity)
    jobs: list[TraceJob] = []
    unrouted: list[TraceJob] = []
    for job in trace.jobs:
        routed = plan.route(job.request.team, scenario.orchestrator_for(job))
        (jobs if routed is not None else unrouted).append(job)
    if unrouted and not skip_unrouted:
        first = unrouted[0]
        raise PoolFileError(
            f"{plan.path}: {plural(len(unrouted), 'job')} {'matches' if len(unrouted) == 1 else 'match'} no pool, "
            f"first {first.id!r} "
            f"(team {first.request.team!r}, kind {scenario.orchestrator_for(first)!r}); "
            "add a pool for them (a pool with neither teams nor kinds takes every job) or skip them"
        )
    federation = Federation() if plan.needs_fair_share else None
    replay = Replay(
        jobs,
        plan.specs,
        scenario,
        policy="pools",
        seed=seed,
        federation=federation,
        horizon_s=horizon_s,
        progress=progress,
        router=plan.route,
    )
    result = replay.run()
    result.figures["trace"] = trace.name
    result.figures["rows_skipped"] = trace.rows_skipped
    result.figures["pool_file"] = plan.path
    jobs_figures = result.figures["jobs"]
    assert isinstance(jobs_figures, dict)
    jobs_figures["skipped_no_pool"] = len(unrouted)
    return result


def require_gpus(nodes: Sequence[Any]) -> None:
    """A fleet without a GPU cannot run or pack a GPU trace: say so instead of dividing by its zero GPUs."""
    if not any(node.gpu_total for node in nodes):
        held = "its node is" if len(nodes) == 1 else f"its {len(nodes)} nodes are all"
        raise ValueError(f"the fleet has no GPU: {held} CPU-only (gpus = 0)")


def simulate_packing(
    trace: Trace, policy: str, *, seed: int = FGD_SEEDS[0], progress: ProgressCallback | None = None
) -> PackingResult:
    if not trace.nodes:
        raise ValueError(
            f"packing needs a node list; trace {trace.name!r} has none: "
            "give --fleet FILE.csv (or use an openb pod list)"
        )
    require_gpus(trace.nodes)
    placement = "fgd" if policy == "federated" else policy
    if placement not in POLICIES:
        raise ValueError(f"packing compares placement policies: {', '.join(POLICIES)} (got {policy!r})")
    return run_packing(trace.nodes, [job.request for job in trace.jobs], policy=placement, seed=seed, progress=progress)
