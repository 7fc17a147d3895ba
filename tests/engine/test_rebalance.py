"""Rebalancer engine: calendar bounds, validation, demand, target split, node choice, expander advice."""

from __future__ import annotations

from scheduling.engine.calendar import Bounds, PolicyRule, bounds_at, check_rules
from scheduling.engine.rebalance import (
    PendingItem,
    PoolDemand,
    RebalanceConfig,
    desired_gpus,
    drain_costs,
    plan_rebalance,
    target_split,
)
from scheduling.engine.types import MemberAssignment, Node, RunningWorkload

WEEKDAYS = frozenset({1, 2, 3, 4, 5})


def rule(
    name: str, orch: str, start: int, end: int, floor: int = 0, ceiling: int | None = None,
    days: set[int] | frozenset[int] = WEEKDAYS, precedence: int = 0,
) -> PolicyRule:
    return PolicyRule(name, orch, frozenset(days), start * 60, end * 60, floor, ceiling, precedence=precedence)


def fleet(slurm: int = 4, k8s: int = 2, ray: int = 2) -> list[Node]:
    nodes = []
    for orch, count in (("slurm", slurm), ("k8s", k8s), ("ray", ray)):
        nodes += [Node(f"{orch}{i}", 8, "H100", orchestrator=orch) for i in range(count)]
    return nodes


def test_a_business_hours_rule_covers_weekday_mornings_but_not_weekends_or_nights() -> None:
    business = rule("business", "k8s", 8, 20, floor=32)
    assert business.covers(1, 9 * 60) and not business.covers(6, 9 * 60) and not business.covers(1, 21 * 60)


def test_an_overnight_window_runs_into_the_next_morning_of_the_day_after_its_start() -> None:
    night = rule("night", "ray", 20, 6, floor=192, days={5})
    assert night.covers(5, 23 * 60) and night.covers(6, 5 * 60) and not night.covers(5, 5 * 60)


def test_the_higher_precedence_rule_wins_where_rules_overlap() -> None:
    base = rule("base", "k8s", 0, 0, floor=8, days=set(range(1, 8)))
    business = rule("business", "k8s", 8, 20, floor=32, precedence=10)
    assert bounds_at([base, business], 2, 10 * 60)["k8s"] == Bounds("k8s", 32, None, True, "business")
    assert bounds_at([base, business], 2, 21 * 60)["k8s"].floor_gpus == 8


def test_floors_that_cannot_all_be_met_at_once_are_rejected_naming_the_field_and_the_rules() -> None:
    problems = check_rules([rule("train", "slurm", 8, 12, floor=48), rule("serve", "k8s", 9, 17, floor=32)], 64)
    assert [p.field for p in problems] == ["floor_gpus"]
    assert set(problems[0].rules) == {"train", "serve"} and "Mon 09:00" in problems[0].message


def test_floors_that_never_overlap_in_time_are_accepted_even_if_they_sum_above_the_fleet() -> None:
    assert check_rules([rule("day", "slurm", 8, 20, floor=48), rule("night", "ray", 20, 8, floor=48)], 64) == ()


def test_overlapping_rules_of_one_orchestrator_with_equal_precedence_are_ambiguous() -> None:
    problems = check_rules([rule("a", "k8s", 8, 12, floor=8), rule("b", "k8s", 10, 14, floor=16)], 64)
    assert problems and problems[0].field == "precedence" and problems[0].rules == ("a", "b")


def test_a_ceiling_below_its_floor_is_rejected() -> None:
    assert check_rules([rule("a", "k8s", 8, 12, floor=16, ceiling=8)], 64)[0].field == "ceiling_gpus"


def test_demand_counts_running_work_at_the_target_utilisation_and_weighs_old_high_priority_pending_more() -> None:
    config = RebalanceConfig()
    assert desired_gpus(PoolDemand("s", allocated_gpus=80), config) == 100
    fresh = desired_gpus(PoolDemand("s", pending=(PendingItem(8),)), config)
    old = desired_gpus(PoolDemand("s", pending=(PendingItem(8, age_s=7200),)), config)
    urgent = desired_gpus(PoolDemand("s", pending=(PendingItem(8, priority=100),)), config)
    assert fresh == 8 and old == 16 and urgent == 16


def test_the_split_gives_floors_first_then_the_rest_by_demand() -> None:
    current = {"slurm": 32, "k8s": 16, "ray": 16}
    demand = {p: PoolDemand(p, pending=(PendingItem(64),)) for p in ("slurm", "ray")}
    config = RebalanceConfig(dead_band_min_gpus=0, dead_band_fraction=0.0)
    targets = {t.orchestrator: t for t in target_split(current, demand, {"k8s": Bounds("k8s", 24)}, config)}
    assert targets["k8s"].target_gpus == 24
    assert targets["slurm"].target_gpus == targets["ray"].target_gpus == 20


def test_a_plan_moves_idle_nodes_before_busy_ones_and_says_why() -> None:
    nodes = fleet(slurm=3, k8s=1, ray=0)
    busy = RunningWorkload("j1", "t", 8, (MemberAssignment(0, "slurm0", tuple(range(8))),), started_at=0.0)
    demand = {"k8s": PoolDemand("k8s", pending=(PendingItem(24),))}
    decision = plan_rebalance(nodes, [busy], demand, {}, now=3600.0)
    assert [m.node for m in decision.moves] == ["slurm1", "slurm2"]
    assert all(m.drain_cost_gpu_s == 0 and "idle node" in m.reason for m in decision.moves)


def test_a_node_running_a_non_preemptible_multi_node_gang_member_is_never_chosen() -> None:
    nodes = [*fleet(slurm=2, k8s=0, ray=0), Node("k8s0", 8, orchestrator="k8s")]
    gang = RunningWorkload("g", "t", 16, (MemberAssignment(0, "slurm0", tuple(range(8))),
                                          MemberAssignment(1, "slurm1", tuple(range(8)))), preemptible=False)
    decision = plan_rebalance(nodes, [gang], {"k8s": PoolDemand("k8s", pending=(PendingItem(16),))}, {}, now=10.0)
    assert decision.moves == () and "slurm0" in decision.reasons[0]
    assert drain_costs(nodes, [gang], 10.0)["slurm0"] is None


def test_a_preemptible_gang_costs_its_whole_work_so_far_on_every_node_it_touches() -> None:
    members = (MemberAssignment(0, "a", tuple(range(8))), MemberAssignment(1, "b", tuple(range(8))))
    gang = RunningWorkload("g", "t", 16, members, started_at=0.0)
    costs = drain_costs([Node("a", 8), Node("b", 8)], [gang], 100.0)
    assert costs == {"a": 1600.0, "b": 1600.0}


def test_pinned_nodes_never_move_even_when_they_are_the_only_idle_ones() -> None:
    nodes = [Node("s0", 8, orchestrator="slurm", pinned=True), Node("s1", 8, orchestrator="slurm", pinned=True),
             Node("k0", 8, orchestrator="k8s")]
    decision = plan_rebalance(nodes, [], {"k8s": PoolDemand("k8s", pending=(PendingItem(16),))}, {}, now=0.0)
    assert decision.moves == ()


def test_moves_per_cycle_are_capped_and_the_plan_says_so() -> None:
    nodes = fleet(slurm=10, k8s=1, ray=0)
    decision = plan_rebalance(nodes, [], {"k8s": PoolDemand("k8s", pending=(PendingItem(80),))}, {}, now=0.0,
                              config=RebalanceConfig(max_moves=2))
    assert len(decision.moves) == 2 and any("capped at 2" in r for r in decision.reasons)


def test_a_pool_below_its_floor_is_refilled_even_inside_the_dead_band_of_the_others() -> None:
    nodes = fleet(slurm=6, k8s=1, ray=1)
    decision = plan_rebalance(nodes, [], {}, {"k8s": Bounds("k8s", 16)}, now=0.0,
                              config=RebalanceConfig(dead_band_min_gpus=64))
    assert [(m.source, m.target) for m in decision.moves] == [("slurm", "k8s")]
    assert "below its floor" in decision.moves[0].reason


def test_a_recently_changed_pool_is_held_within_its_bounds() -> None:
    current = {"slurm": 32, "k8s": 16}
    demand = {"k8s": PoolDemand("k8s", pending=(PendingItem(32),))}
    held = {t.orchestrator: t for t in target_split(current, demand, {}, RebalanceConfig(), held_s={"k8s": 60.0})}
    assert held["k8s"].target_gpus == 16 and held["k8s"].reason.startswith("held")


def test_the_predicted_effect_counts_pending_gpus_served_by_the_moves() -> None:
    nodes = fleet(slurm=4, k8s=1, ray=0)
    demand = {"k8s": PoolDemand("k8s", allocated_gpus=8, pending=(PendingItem(8),))}
    decision = plan_rebalance(nodes, [], demand, {}, now=0.0)
    effect = next(e for e in decision.effects if e.orchestrator == "k8s")
    assert effect.gpus_after > effect.gpus_before and effect.pending_served_gpus == 8


def test_expander_advice_names_the_node_group_to_grow_when_demand_exceeds_the_fleet() -> None:
    nodes = fleet(slurm=2, k8s=0, ray=2)
    demand = {"slurm": PoolDemand("slurm", allocated_gpus=16, pending=(PendingItem(64, priority=50),)),
              "ray": PoolDemand("ray", allocated_gpus=16, pending=(PendingItem(8),))}
    advice = plan_rebalance(nodes, [], demand, {}, now=0.0).advice
    assert advice and advice[0].orchestrator == "slurm" and advice[0].node_group == "slurm/H100x8"
    assert advice[0].nodes_to_add >= 1


def test_no_expander_advice_when_the_pool_covers_demand() -> None:
    demand = {"slurm": PoolDemand("slurm", allocated_gpus=8, pending=(PendingItem(4),))}
    assert plan_rebalance(fleet(), [], demand, {}, now=0.0).advice == ()


def test_a_floor_starting_within_the_lead_time_is_already_in_force_so_nodes_drain_before_it_starts() -> None:
    from scheduling.engine.calendar import bounds_ahead

    rules = [rule("business", "k8s", 8, 20, floor=32), rule("night", "k8s", 20, 8, floor=8, days=set(range(1, 8)))]
    assert bounds_ahead(rules, 1, 7 * 60 + 15, 60)["k8s"].floor_gpus == 32
    assert bounds_ahead(rules, 1, 6 * 60, 60)["k8s"].floor_gpus == 8
    assert bounds_ahead(rules, 7, 23 * 60 + 30, 60)["k8s"].floor_gpus == 8  # Monday 08:00 is more than an hour off
    assert bounds_ahead(rules, 5, 7 * 60 + 30, 60)["k8s"].rule.startswith("business")


def test_a_pool_under_a_non_lendable_rule_gives_no_node_even_to_a_floor() -> None:
    nodes = fleet(slurm=4, k8s=0, ray=0)
    bounds = {"k8s": Bounds("k8s", 16), "slurm": Bounds("slurm", 0, lendable=False)}
    assert plan_rebalance(nodes, [], {}, bounds, now=0.0).moves == ()
