"""The entitlement split's invariants, as properties over random team trees, fleets and demand."""

from __future__ import annotations

from dataclasses import dataclass, replace

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from scheduling.engine.entitlement_split import (
    Demand,
    Split,
    Supply,
    divide_among,
    split_entitlements,
)
from scheduling.engine.governance_state import GovernanceInput, GovGrant, GovQueue, GovTeam
from scheduling.engine.types import OrchestratorKind
from tests.engine.test_entitlement_split import guarantee_and_cap

AT = 1_000.0
KINDS = (OrchestratorKind.SLURM, OrchestratorKind.KUBERNETES, OrchestratorKind.RAY)


@dataclass(frozen=True)
class Case:
    data: GovernanceInput
    supply: tuple[Supply, ...]
    demand: tuple[Demand, ...]

    @property
    def pinned(self) -> bool:
        return any(g.orchestrator for g in self.data.grants)


@st.composite
def fleets(draw: st.DrawFn, *, pinned_grants: bool = True, max_roots: int = 3, depth: int = 2) -> Case:
    n_cells = draw(st.integers(1, 4))
    supply = tuple(Supply(f"o{i}", draw(st.sampled_from(KINDS)), "", draw(st.integers(0, 64))) for i in range(n_cells))
    teams: list[GovTeam] = []
    queues: list[GovQueue] = []

    def add(slug: str, parent: str | None, guaranteed: int, level: int) -> None:
        teams.append(GovTeam(slug, parent))
        queues.append(GovQueue(slug, 50.0, guaranteed, guaranteed + draw(st.integers(0, 48))))
        if level < depth:
            kids = draw(st.integers(0, 2))
            budget = guaranteed
            for k in range(kids):
                g = draw(st.integers(0, budget))
                budget -= g
                add(f"{slug}-{k}", slug, g, level + 1)

    for r in range(draw(st.integers(1, max_roots))):
        add(f"t{r}", None, draw(st.integers(0, 64)), 0)
    grants = []
    for team in teams:
        for _ in range(draw(st.integers(0, 2))):
            orch = draw(st.sampled_from(["", *(s.orchestrator for s in supply)])) if pinned_grants else ""
            expired = draw(st.booleans())
            ends = AT - 1 if expired else AT + 100
            grants.append(GovGrant(team.slug, draw(st.integers(1, 16)), 0.0, ends, orchestrator=orch))
    demand = []
    for cell in supply:
        free = cell.gpus
        for team in teams:
            running = draw(st.integers(0, min(free, 24)))
            free -= running
            pending = draw(st.integers(0, 40))
            if running or pending:
                demand.append(Demand(team.slug, cell.orchestrator, "", running, pending))
    return Case(GovernanceInput(tuple(teams), tuple(queues), tuple(grants)), supply, tuple(demand))


def run(case: Case, previous: Split | None = None) -> Split:
    return split_entitlements(case.data, AT, case.supply, case.demand, previous)


def subtree_running(case: Case, slug: str, orchestrator: str) -> int:
    parent = {t.slug: t.parent for t in case.data.teams}

    def inside(team: str) -> bool:
        node: str | None = team
        while node is not None:
            if node == slug:
                return True
            node = parent[node]
        return False

    return sum(d.running for d in case.demand if d.orchestrator == orchestrator and inside(d.team))


def figures(split: Split) -> dict[tuple[str, str, str], tuple[int, int | None]]:
    return {s.key: (s.guarantee, s.cap) for s in split.shares}


@settings(max_examples=200, deadline=None)
@given(fleets())
def test_a_teams_caps_over_all_orchestrators_never_exceed_its_fleet_cap(case: Case) -> None:
    split = run(case)
    for team, fleet in split.fleet.items():
        assert fleet.cap is not None
        shares = split.of_team(team)
        assert sum((s.cap or 0) - s.over for s in shares) <= fleet.cap
        for s in shares:  # whatever is above the entitlement is exactly what runs there, never headroom
            if s.over:
                assert s.cap == subtree_running(case, team, s.orchestrator)


@settings(max_examples=200, deadline=None)
@given(fleets(pinned_grants=False, depth=0))
def test_within_its_fleet_cap_a_team_is_never_held_above_it(case: Case) -> None:
    # Flat teams: nothing but its own running GPUs beyond its cap could hold a team over it. (In a tree a
    # parent is held over when a child's guarantee waits on GPUs a sibling borrowed: reclaim's work.)
    split = run(case)
    for team, fleet in split.fleet.items():
        running = sum(subtree_running(case, team, s.orchestrator) for s in case.supply)
        if fleet.cap is not None and running <= fleet.cap:
            assert sum(s.cap or 0 for s in split.of_team(team)) <= fleet.cap
            assert all(s.over == 0 for s in split.of_team(team))


@settings(max_examples=200, deadline=None)
@given(fleets())
def test_nobodys_cap_drops_below_what_it_runs_there(case: Case) -> None:
    split = run(case)
    for s in split.shares:
        assert s.cap is not None and s.cap >= subtree_running(case, s.team, s.orchestrator)


@settings(max_examples=200, deadline=None)
@given(fleets())
def test_on_every_orchestrator_the_guarantees_fit_its_supply_and_children_fit_their_parent(case: Case) -> None:
    split = run(case)
    parent = {t.slug: t.parent for t in case.data.teams}
    for cell in case.supply:
        shares = [s for s in split.shares if s.orchestrator == cell.orchestrator]
        assert sum(s.guarantee for s in shares if parent[s.team] is None) <= cell.gpus
        for p in {t.slug for t in case.data.teams}:
            kids = [s for s in shares if parent[s.team] == p]
            mine = split.share(p, cell.orchestrator, "")
            assert mine is not None
            assert sum(s.guarantee for s in kids) <= mine.guarantee
            for kid in kids:  # a child never exceeds its parent on any orchestrator
                assert kid.cap is not None and mine.cap is not None and kid.cap <= mine.cap
            assert mine.guarantee <= (mine.cap or 0)


@settings(max_examples=200, deadline=None)
@given(fleets(pinned_grants=False))
def test_guarantees_sum_to_the_fleet_guarantee_while_the_fleet_can_hold_them(case: Case) -> None:
    split = run(case)
    roots = [t.slug for t in case.data.teams if t.parent is None]
    assume(sum(split.fleet[r].guarantee for r in roots) <= sum(s.gpus for s in case.supply))
    kids: dict[str, list[str]] = {}
    for t in case.data.teams:
        if t.parent:
            kids.setdefault(t.parent, []).append(t.slug)
    held = list(roots)
    while held:
        team = held.pop()
        assert sum(s.guarantee for s in split.of_team(team)) == split.fleet[team].guarantee
        # the children can hold theirs when the parent's covers them (the strategy draws them so)
        if sum(split.fleet[k].guarantee for k in kids.get(team, [])) <= split.fleet[team].guarantee:
            held.extend(kids.get(team, []))


@settings(max_examples=150, deadline=None)
@given(fleets())
def test_with_unchanged_inputs_the_split_is_a_fixed_point(case: Case) -> None:
    first = run(case)
    second = run(case, first)
    assert figures(second) == figures(first)
    assert figures(run(case, second)) == figures(first)


@settings(max_examples=150, deadline=None)
@given(fleets(), st.data())
def test_demand_moving_within_the_band_does_not_move_the_split(case: Case, data: st.DataObject) -> None:
    first = run(case)
    moved = []
    for d in case.demand:
        band_pending = d.pending // 10
        pending = d.pending + data.draw(st.integers(-band_pending, band_pending))
        running = d.running - data.draw(st.integers(0, d.running // 10))  # fewer running: frees, never binds
        moved.append(replace(d, running=running, pending=pending))
    assume(tuple(moved) != case.demand)
    after = run(replace(case, demand=tuple(moved)), first)
    assert figures(after) == figures(first)


@settings(max_examples=150, deadline=None)
@given(fleets(max_roots=1, pinned_grants=False), fleets(max_roots=1, pinned_grants=False))
def test_where_demand_moves_beyond_the_band_the_split_follows_within_one_round(before: Case, after: Case) -> None:
    # one team alone on the fleet: yesterday's demand (Slurm at 9 am) gave the previous split; today's
    # (a Ray sweep overnight) differs on every cell beyond the band. Whatever fits is served in one round.
    team = GovTeam("t0")
    queue = after.data.queues[0]
    data = GovernanceInput((team,), (replace(queue, team="t0"),))
    supply = after.supply
    old = [Demand("t0", s.orchestrator, "", 0, 0) for s in supply]
    new = [Demand("t0", s.orchestrator, "", 0, p) for s, p in zip(supply, _far(before, supply), strict=True)]
    previous = split_entitlements(data, AT, supply, old)
    assume(all(d.pending <= s.gpus for d, s in zip(new, supply, strict=True)))
    assume(sum(d.pending for d in new) <= queue.burst_limit)
    split = split_entitlements(data, AT, supply, new, previous)
    for d in new:
        assert guarantee_and_cap(split, "t0", d.orchestrator, "")[1] is not None
        assert (split.share("t0", d.orchestrator, "") or _never()).cap >= d.pending  # type: ignore[operator]


def _far(case: Case, supply: tuple[Supply, ...]) -> list[int]:
    """Pending per cell drawn from another case's demand: anything above 0 is beyond the band of 0."""
    by_cell: dict[str, int] = {}
    for d in case.demand:
        by_cell[d.orchestrator] = by_cell.get(d.orchestrator, 0) + d.pending
    return [by_cell.get(s.orchestrator, 0) for s in supply]


def _never() -> object:
    raise AssertionError("no share")


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 200), st.lists(st.tuples(st.integers(0, 40), st.integers(0, 40)), min_size=1, max_size=6))
def test_a_cap_divided_among_namespaces_sums_to_it_and_covers_what_runs_first(
    total: int, work: list[tuple[int, int]]
) -> None:
    running, pending = [r for r, _ in work], [p for _, p in work]
    parts = divide_among(total, running, pending)
    assert sum(parts) == total and all(p >= 0 for p in parts)
    if sum(running) <= total:
        assert all(part >= r for part, r in zip(parts, running, strict=True))
    if sum(running) + sum(pending) <= total:
        assert all(part >= r + p for part, r, p in zip(parts, running, pending, strict=True))
        assert max(parts) - min(x - r - p for x, r, p in zip(parts, running, pending, strict=True)) >= 0


def _placed_plainly(amount: int, targets: list[list[int]], base: list[int], room: list[int]) -> list[int]:
    """The placement rule written the obvious way (min/max, no shortcuts): the split's fast `_place` must
    give exactly this, so the speed-up cannot have moved a single GPU."""
    from scheduling.engine.entitlement_split import _share_out

    cells = range(len(room))
    placed = [0] * len(room)
    for target in targets:
        if amount <= 0:
            break
        asked = [max(0, min(target[c] - base[c] - placed[c], room[c])) for c in cells]
        if any(asked):
            given = _share_out(amount, asked)
            for c in cells:
                placed[c] += given[c]
                room[c] -= given[c]
            amount -= sum(given)
    return placed


@settings(max_examples=300, deadline=None)
@given(
    st.integers(-5, 120),
    st.integers(1, 6).flatmap(
        lambda n: st.tuples(
            st.lists(st.lists(st.integers(0, 50), min_size=n, max_size=n), min_size=1, max_size=3),
            st.lists(st.integers(0, 30), min_size=n, max_size=n),
            st.lists(st.integers(-3, 60), min_size=n, max_size=n),
        )
    ),
)
def test_the_fast_placement_places_exactly_what_the_plain_rule_does(
    amount: int, shape: tuple[list[list[int]], list[int], list[int]]
) -> None:
    from scheduling.engine.entitlement_split import _place

    targets, base, room = shape
    fast_room, plain_room = list(room), list(room)
    fast = _place(amount, range(len(room)), targets, base, fast_room, rest=False)
    assert fast == _placed_plainly(amount, targets, base, plain_room)
    assert fast_room == plain_room
