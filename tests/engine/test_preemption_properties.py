from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from scheduling.engine.placement import ClusterState
from scheduling.engine.preemption import RunningSet, apply_victim_plan, select_victims
from scheduling.engine.types import (
    Entitlement,
    Request,
    RunningWorkload,
    VictimPlan,
)

from .strategies import busy_fleets

TEAMS = ("a", "b", "c")
NOW = 10_000.0


@settings(max_examples=150, deadline=None)
@given(busy_fleets(TEAMS, (0.0, 9_900.0)), st.dictionaries(st.sampled_from(TEAMS), st.integers(0, 12)),
       st.sampled_from(TEAMS), st.integers(1, 8), st.integers(0, 5))
def test_victims_are_whole_gangs_and_never_breach_a_floor(
    fleet: tuple[ClusterState, list[RunningWorkload]], floors: dict[str, int], team: str, gpus: int,
    priority: int,
) -> None:
    state, running = fleet
    held = {t: sum(w.gpus for w in running if w.team == t) for t in TEAMS}
    ents = [Entitlement(t, float(floors.get(t, 0)), 8.0, 24.0, 24.0, float(floors.get(t, 0)) + 4, in_use=held[t])
            for t in TEAMS]
    request = Request("new", gpus_per_member=gpus, team=team, priority=priority)
    result = select_victims(state, running, request, ents, now=NOW, min_runtime_s=600)
    if not isinstance(result, VictimPlan):
        return
    victims = {v.workload_id for v in result.victims}
    by_gang: dict[str, set[str]] = {}
    for workload in running:
        by_gang.setdefault(workload.gang_id, set()).add(workload.id)
    for victim in result.victims:
        assert by_gang[victim.gang_id] <= victims  # the whole gang goes
        workload = next(w for w in running if w.id == victim.workload_id)
        assert NOW - workload.started_at >= 600
        assert victim.reason
    for other in TEAMS:
        if other == team:
            continue
        taken = sum(v.gpus for v in result.victims if v.team == other)
        if taken:
            assert held[other] - taken >= floors.get(other, 0)
    index = RunningSet(running)
    apply_victim_plan(state, index, result, request, now=NOW)  # the plan is executable as decided
    for node in state.nodes():
        assert all(0 <= milli <= 1000 for milli in node.free_milli())
