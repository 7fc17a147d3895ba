from __future__ import annotations

from hypothesis import example, given, settings
from hypothesis import strategies as st

from scheduling.engine.fairshare import entitlements, order_pending
from scheduling.engine.types import Request, TeamSpec

EPS = 1e-6


@st.composite
def team_trees(draw: st.DrawFn) -> list[TeamSpec]:
    count = draw(st.integers(1, 8))
    teams: list[TeamSpec] = []
    for i in range(count):
        parent = draw(st.one_of(st.none(), st.sampled_from([t.name for t in teams]))) if teams else None
        teams.append(TeamSpec(
            name=f"t{i}", parent=parent, weight=draw(st.sampled_from((0.0, 10.0, 25.0, 50.0))),
            guaranteed=draw(st.integers(0, 20)), burst_limit=draw(st.one_of(st.none(), st.integers(0, 60))),
        ))
    return teams


@settings(max_examples=200, deadline=None)
@given(team_trees(), st.integers(0, 100), st.data())
def test_entitlements_respect_capacity_demand_limits_and_floors(
    teams: list[TeamSpec], capacity: int, data: st.DataObject
) -> None:
    demand = {t.name: float(data.draw(st.integers(0, 50))) for t in teams}
    result = {e.team: e for e in entitlements(teams, capacity, demand)}
    assert set(result) == {t.name for t in teams}
    roots = [t for t in teams if t.parent is None]
    assert sum(result[t.name].allocation for t in roots) <= capacity + EPS
    for team in teams:
        entitlement = result[team.name]
        children = [t for t in teams if t.parent == team.name]
        assert sum(result[c.name].allocation for c in children) <= entitlement.allocation + EPS
        assert entitlement.allocation >= -EPS
        assert entitlement.allocation <= entitlement.demand + EPS
        assert entitlement.allocation <= entitlement.limit + EPS
        if team.burst_limit is not None:
            assert entitlement.allocation <= team.burst_limit + EPS


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 30), st.integers(0, 40), st.sampled_from((1.0, 10.0, 50.0))),
                min_size=1, max_size=8), st.integers(0, 200))
@example(rows=[(0, 1, 1.0), (0, 16, 50.0), (0, 29, 50.0)], capacity=46)  # a level landing on a breakpoint
def test_guaranteed_floors_are_met_whenever_guarantees_fit_the_capacity(
    rows: list[tuple[int, int, float]], capacity: int
) -> None:
    teams = [TeamSpec(f"t{i}", weight=w, guaranteed=g) for i, (g, _d, w) in enumerate(rows)]
    demand = {f"t{i}": float(d) for i, (_g, d, _w) in enumerate(rows)}
    floors = {t.name: min(t.guaranteed, demand[t.name], capacity) for t in teams}
    result = {e.team: e for e in entitlements(teams, capacity, demand)}
    if sum(floors.values()) <= capacity:
        for name, floor in floors.items():
            assert result[name].allocation >= floor - EPS
    # Work-conserving: capacity is left idle only when every demand is met.
    total = sum(e.allocation for e in result.values())
    if total < capacity - EPS:
        assert all(e.allocation >= e.demand - EPS for e in result.values())


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(("a", "b", "c", "none")), st.integers(0, 3), st.integers(0, 5)),
                max_size=30),
       st.dictionaries(st.sampled_from(("a", "b", "c")), st.floats(0, 100)))
def test_pending_order_is_the_documented_lexicographic_order(
    rows: list[tuple[str, int, int]], usage: dict[str, float]
) -> None:
    requests = [Request(f"r{i}", team=team, priority=p, submitted_at=float(t)) for i, (team, p, t) in enumerate(rows)]
    shares = {"a": 10.0, "b": 30.0, "c": 0.0}
    ordered = order_pending(requests, usage, shares)

    def key(r: Request) -> tuple[float, int, float, str]:
        share = shares.get(r.team, 0.0)
        return (usage.get(r.team, 0.0) / share if share > 0 else float("inf"), -r.priority, r.submitted_at, r.id)

    assert list(ordered) == sorted(requests, key=key)
