"""Small hand-built fleets for engine tests (no database, no randomness unless seeded)."""

from __future__ import annotations

from scheduling.engine.types import MemberAssignment, Node, RunningWorkload


def dgx(name: str, free: int = 8, *, leaf: str = "leaf-0", spine: str = "spine-0", model: str = "H100",
        cpu: int = 0, memory: int = 0, schedulable: bool = True) -> Node:
    """An 8-GPU host that is its own NVLink domain, with ``free`` whole GPUs free (the first ones used)."""
    used = 8 - free
    return Node(
        name=name, gpu_total=8, gpu_model=model, gpu_free_milli=(0,) * used + (1000,) * free,
        cpu_milli_total=cpu, cpu_milli_free=cpu, memory_mib_total=memory, memory_mib_free=memory,
        nvlink_domain=name, leaf_switch=leaf, spine=spine, schedulable=schedulable,
    )


def two_tier_fleet(leaves: int, nodes_per_leaf: int, leaves_per_spine: int = 4) -> list[Node]:
    """Empty DGX nodes under leaf switches under spines, named n<leaf>-<i>."""
    return [
        dgx(f"n{leaf}-{i}", leaf=f"leaf-{leaf}", spine=f"spine-{leaf // leaves_per_spine}")
        for leaf in range(leaves) for i in range(nodes_per_leaf)
    ]


def filling_work(
    free: list[int], ends: list[float | None], now: float, teams: str = "t"
) -> tuple[RunningWorkload, ...]:
    """The running work of ``dgx(f"n{i}", free=free[i])`` nodes: one workload on each busy node holding its used
    GPUs, ending ``ends[i]`` seconds after ``now`` (None: unknown end; a node past ``ends`` counts as unknown
    too), of team ``teams[i % len(teams)]``."""
    return tuple(
        RunningWorkload(f"r{i}", teams[i % len(teams)], float(8 - f),
                        (MemberAssignment(0, f"n{i}", tuple(range(8 - f))),),
                        expected_end=None if end is None else now + end)
        for i, (f, end) in enumerate(zip(free, ends, strict=False)) if f < 8
    )

