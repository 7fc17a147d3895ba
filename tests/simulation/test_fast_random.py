"""The random fast path must make exactly the engine's decisions (it stands in for an engine change)."""

from __future__ import annotations

import random

import pytest

from scheduling.engine.placement import ClusterState
from scheduling.engine.types import Node, Placement, Request
from scheduling.simulation.fast_random import RandomSinglePlacer
from scheduling.simulation.mirror import FleetMirror
from scheduling.simulation.packing import run_packing


def fleet(rng: random.Random) -> list[Node]:
    nodes = []
    for i in range(30):
        cpu = rng.choice([0, 16000, 64000])
        memory = rng.choice([0, 65536])
        nodes.append(
            Node(
                name=f"n{i:02d}",
                gpu_total=rng.choice([1, 2, 4, 8]),
                gpu_model=rng.choice(["A", "B", "C"]),
                cpu_milli_total=cpu,
                cpu_milli_free=cpu,
                memory_mib_total=memory,
                memory_mib_free=memory,
                schedulable=rng.random() > 0.1,
            )
        )
    return nodes


def pod(rng: random.Random, i: int) -> Request:
    shared = rng.random() < 0.4
    models = frozenset(rng.sample(["A", "B", "C", "Z"], rng.choice([0, 0, 1, 2])))
    return Request(
        id=f"p{i}",
        gpus_per_member=0 if shared else rng.choice([1, 1, 2, 4, 8]),
        gpu_milli=rng.choice([100, 250, 500, 900]) if shared else 0,
        gpu_models=models,
        cpu_milli=rng.choice([0, 2000, 8000]),
        memory_mib=rng.choice([0, 4096, 16384]),
    )


@pytest.mark.parametrize("case", range(8))
def test_it_decides_every_pod_exactly_as_the_engine_does(case: int) -> None:
    rng = random.Random(case)
    state = ClusterState(fleet(rng))
    mirror = FleetMirror(state)
    placer = RandomSinglePlacer(state, mirror)
    placed = 0
    for i in range(200):
        request = pod(rng, i)
        fast = placer.place(request, seed=case * 1000 + i)
        engine = state.place(request, "random", seed=case * 1000 + i)
        assert isinstance(fast, Placement) == isinstance(engine, Placement)
        if isinstance(engine, Placement):
            assert fast == engine
            state.commit(engine, request)
            mirror.refresh(engine.nodes)
            placed += 1
    assert placed > 20


def test_a_verified_packing_run_matches_the_engine_decision_for_decision() -> None:
    rng = random.Random(5)
    nodes = [node for node in fleet(rng) if node.schedulable]
    pods = [pod(rng, i) for i in range(60)]

    checked = run_packing(nodes, pods, policy="random", seed=42, verify=True)
    fast = run_packing(nodes, pods, policy="random", seed=42)

    assert checked.allocation_pct == fast.allocation_pct
    assert checked.pods_placed == fast.pods_placed > 0
