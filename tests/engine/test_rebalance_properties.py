"""Properties of the rebalancer: floors honoured, moves capped, pinned never moved, no flapping on noise."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from scheduling.engine.calendar import Bounds
from scheduling.engine.rebalance import PendingItem, PoolDemand, RebalanceConfig, current_gpus, plan_rebalance
from scheduling.engine.types import Node

POOLS = ("slurm", "k8s", "ray")


@st.composite
def situations(draw: st.DrawFn) -> tuple[list[Node], dict[str, PoolDemand], dict[str, Bounds], RebalanceConfig]:
    nodes = [
        Node(f"n{i}", draw(st.sampled_from((4, 8))), orchestrator=draw(st.sampled_from(POOLS)),
             pinned=draw(st.booleans()) and draw(st.booleans()), schedulable=draw(st.integers(0, 9)) > 0)
        for i in range(draw(st.integers(1, 24)))
    ]
    owned = current_gpus(nodes)
    bounds = {}
    for pool in POOLS:
        if draw(st.booleans()):  # a floor the pool already meets, or one to be refilled
            floor = draw(st.integers(0, owned.get(pool, 0) + 16))
            ceiling = draw(st.one_of(st.none(), st.integers(floor, floor + 64)))
            bounds[pool] = Bounds(pool, floor, ceiling)
    demand = {
        pool: PoolDemand(pool, tuple(PendingItem(draw(st.sampled_from((1, 8, 32))), draw(st.integers(-50, 200)),
                                                 draw(st.floats(0, 10_000))) for _ in range(draw(st.integers(0, 4)))),
                         allocated_gpus=draw(st.floats(0, 64)))
        for pool in POOLS
    }
    config = RebalanceConfig(max_moves=draw(st.integers(0, 6)), dead_band_min_gpus=draw(st.sampled_from((0, 8, 16))))
    return nodes, demand, bounds, config


@settings(max_examples=150, deadline=None)
@given(situations())
def test_no_plan_takes_a_pool_below_its_floor_or_moves_more_than_the_cap(situation) -> None:  # type: ignore[no-untyped-def]
    nodes, demand, bounds, config = situation
    decision = plan_rebalance(nodes, [], demand, bounds, now=0.0, config=config)
    assert len(decision.moves) <= config.max_moves
    after = current_gpus(nodes)
    for move in decision.moves:
        after[move.source] -= move.gpus
        after[move.target] = after.get(move.target, 0) + move.gpus
    for pool, bound in bounds.items():
        before = current_gpus(nodes).get(pool, 0)
        assert after.get(pool, 0) >= min(bound.floor_gpus, before), f"{pool} pushed below its floor"
        if bound.ceiling_gpus is not None and after.get(pool, 0) > before:
            assert after[pool] <= bound.ceiling_gpus, f"{pool} filled above its ceiling"
    for target in decision.targets:
        assert target.target_gpus >= target.floor_gpus


@settings(max_examples=150, deadline=None)
@given(situations())
def test_pinned_and_unschedulable_nodes_never_move_and_no_node_moves_twice(situation) -> None:  # type: ignore[no-untyped-def]
    nodes, demand, bounds, config = situation
    by_name = {n.name: n for n in nodes}
    moves = plan_rebalance(nodes, [], demand, bounds, now=0.0, config=config).moves
    assert len({m.node for m in moves}) == len(moves)
    for move in moves:
        node = by_name[move.node]
        assert not node.pinned and node.schedulable and node.orchestrator == move.source != move.target


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**32 - 1), st.floats(0.0, 0.3))
def test_noisy_demand_around_a_steady_level_does_not_flap_nodes_back_and_forth(seed: int, noise: float) -> None:
    """50 cycles of 5 min with demand jittering ±noise around a fixed mix. Within ±5 % (the dead band)
    no node ever moves back; with more noise a node may move back, but never before the hold time."""
    rng = random.Random(seed)
    nodes = [Node(f"n{i}", 8, orchestrator=POOLS[i % 3]) for i in range(24)]
    level = {"slurm": 96.0, "k8s": 40.0, "ray": 56.0}
    config = RebalanceConfig()
    history: list[tuple[float, str, str, str]] = []
    last_change: dict[str, float] = {}
    for cycle in range(50):
        now = cycle * 300.0
        demand = {p: PoolDemand(p, allocated_gpus=level[p] * 0.8 * (1 + rng.uniform(-noise, noise))) for p in POOLS}
        held = {p: now - t for p, t in last_change.items()}
        decision = plan_rebalance(nodes, [], demand, {}, now=now, config=config, held_s=held)
        for move in decision.moves:
            history.append((now, move.node, move.source, move.target))
            last_change[move.source] = last_change[move.target] = now
            nodes = [Node(n.name, n.gpu_total, orchestrator=move.target) if n.name == move.node else n for n in nodes]
    reversals = [
        (later - earlier, node)
        for earlier, node, source, target in history
        for later, node2, source2, target2 in history
        if node2 == node and (source2, target2) == (target, source) and later > earlier
    ]
    if noise <= config.dead_band_fraction:
        assert not reversals, f"flapped: {reversals}"
    assert all(gap >= config.hold_s for gap, _node in reversals), f"moved back within the hold time: {reversals}"
