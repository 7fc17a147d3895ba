from __future__ import annotations

from scheduling.engine.fairshare import entitlements
from scheduling.engine.placement import ClusterState
from scheduling.engine.preemption import RunningSet, apply_victim_plan, select_victims
from scheduling.engine.types import (
    Entitlement,
    MemberAssignment,
    Placement,
    Rejection,
    Request,
    RunningWorkload,
    TeamSpec,
    VictimPlan,
)

from .fleets import dgx

NOW = 10_000.0


def job(id: str, team: str, node: str, gpus: tuple[int, ...], *, priority: int = 0, started_at: float = 0.0,
        gang: str = "", preemptible: bool = True) -> RunningWorkload:
    return RunningWorkload(id, team, float(len(gpus)), (MemberAssignment(0, node, gpus),), priority=priority,
                           started_at=started_at, gang_id=gang, preemptible=preemptible)


def full_state(running: list[RunningWorkload], nodes: int = 2) -> ClusterState:
    state = ClusterState([dgx(f"n{i}") for i in range(nodes)])
    for workload in running:
        request = Request(workload.id, members=len(workload.assignments),
                          gpus_per_member=len(workload.assignments[0].gpu_indices))
        state.commit(Placement(workload.id, workload.assignments, request.topology), request)
    return state


def ents(guaranteed: dict[str, int], running: list[RunningWorkload], capacity: int = 16) -> tuple[Entitlement, ...]:
    teams = [TeamSpec(team, weight=50, guaranteed=g) for team, g in guaranteed.items()]
    held: dict[str, float] = {}
    for workload in running:
        held[workload.team] = held.get(workload.team, 0.0) + workload.gpus
    return entitlements(teams, capacity, {team: 16.0 for team in guaranteed}, held)


def plan(result: VictimPlan | Rejection) -> VictimPlan:
    assert isinstance(result, VictimPlan), result
    return result


def test_preemption_picks_the_borrower_not_the_team_under_its_guarantee() -> None:
    running = [job("guarded", "safe", "n0", tuple(range(8)), started_at=9_000.0),
               job("borrowed", "greedy", "n1", tuple(range(8)), started_at=9_000.0)]
    state = full_state(running)
    result = plan(select_victims(state, running, Request("new", gpus_per_member=8, team="safe2", priority=5),
                                 ents({"safe": 8, "greedy": 0, "safe2": 8}, running), now=NOW, min_runtime_s=0))
    assert [v.workload_id for v in result.victims] == ["borrowed"]
    assert "borrows" in result.victims[0].reason
    assert result.placement.nodes == ("n1",)


def test_a_team_is_never_preempted_below_its_guaranteed_floor() -> None:
    running = [job("a", "owner", "n0", tuple(range(8))), job("b", "owner", "n1", tuple(range(8)))]
    state = full_state(running)
    result = select_victims(state, running, Request("new", gpus_per_member=8, team="other", priority=9),
                            ents({"owner": 16, "other": 0}, running), now=NOW, min_runtime_s=0)
    assert isinstance(result, Rejection)
    assert "guaranteed floor" in result.message


def test_the_lowest_priority_and_newest_victim_is_chosen_first() -> None:
    running = [job("old-low", "t", "n0", (0, 1, 2, 3), priority=1, started_at=100.0),
               job("new-low", "t", "n0", (4, 5, 6, 7), priority=1, started_at=9_000.0),
               job("lowest", "t", "n1", (0, 1, 2, 3), priority=0, started_at=100.0),
               job("mid", "t", "n1", (4, 5, 6, 7), priority=2, started_at=9_000.0)]
    state = full_state(running)
    result = plan(select_victims(state, running, Request("new", gpus_per_member=4, team="t", priority=5),
                                 ents({"t": 0}, running), now=NOW, min_runtime_s=0))
    assert [v.workload_id for v in result.victims] == ["lowest"]


def test_whole_gangs_are_preempted_together() -> None:
    running = [job("g-0", "t", "n0", tuple(range(8)), gang="g"), job("g-1", "t", "n1", (0, 1, 2, 3), gang="g"),
               job("other", "t", "n1", (4, 5, 6, 7), priority=3)]
    state = full_state(running)
    result = plan(select_victims(state, running, Request("new", gpus_per_member=8, team="t", priority=5),
                                 ents({"t": 0}, running), now=NOW, min_runtime_s=0))
    assert {v.workload_id for v in result.victims} == {"g-0", "g-1"}
    assert {v.gang_id for v in result.victims} == {"g"}


def test_work_inside_its_minimum_runtime_is_spared() -> None:
    running = [job("fresh", "t", "n0", tuple(range(8)), started_at=NOW - 10),
               job("seasoned", "t", "n1", tuple(range(8)), started_at=NOW - 4_000)]
    state = full_state(running)
    result = plan(select_victims(state, running, Request("new", gpus_per_member=8, team="t", priority=5),
                                 ents({"t": 0}, running), now=NOW, min_runtime_s=600))
    assert [v.workload_id for v in result.victims] == ["seasoned"]


def test_equal_priority_work_of_the_same_team_is_not_preempted() -> None:
    running = [job("peer", "t", "n0", tuple(range(8)), priority=5)]
    state = full_state(running, nodes=1)
    result = select_victims(state, running, Request("new", gpus_per_member=8, team="t", priority=5),
                            ents({"t": 0}, running, capacity=8), now=NOW, min_runtime_s=0)
    assert isinstance(result, Rejection)
    assert result.constraint == "preemption"


def test_a_request_that_already_fits_needs_no_victims() -> None:
    running = [job("a", "t", "n0", (0, 1))]
    state = full_state(running)
    result = plan(select_victims(state, running, Request("new", gpus_per_member=4, team="t", priority=1),
                                 ents({"t": 0}, running), now=NOW, min_runtime_s=0))
    assert result.victims == ()


def test_unneeded_victims_are_dropped_from_the_plan() -> None:
    running = [job("small", "t", "n0", (0,), started_at=9_500.0),
               job("big", "t", "n0", (1, 2, 3, 4, 5, 6, 7), started_at=9_000.0)]
    state = full_state(running, nodes=1)
    result = plan(select_victims(state, running, Request("new", gpus_per_member=7, team="t", priority=5),
                                 ents({"t": 0}, running, capacity=8), now=NOW, min_runtime_s=0))
    assert [v.workload_id for v in result.victims] == ["big"]


def test_a_multi_node_gang_can_preempt_across_nodes() -> None:
    running = [job("x", "t", "n0", tuple(range(8))), job("y", "t", "n1", tuple(range(8)))]
    state = full_state(running)
    request = Request("gang", members=2, gpus_per_member=8, team="t", priority=5)
    result = plan(select_victims(state, running, request, ents({"t": 0}, running), now=NOW, min_runtime_s=0))
    assert {v.workload_id for v in result.victims} == {"x", "y"}
    assert set(result.placement.nodes) == {"n0", "n1"}


def test_applying_a_plan_frees_the_victims_and_starts_the_request() -> None:
    running = [job("low", "t", "n0", tuple(range(8)))]
    state = full_state(running, nodes=1)
    index = RunningSet(running)
    request = Request("new", gpus_per_member=8, team="t", priority=5)
    decided = plan(select_victims(state, index, request, ents({"t": 0}, running, 8), now=NOW, min_runtime_s=0))
    apply_victim_plan(state, index, decided, request, now=NOW)
    assert [w.id for w in index] == ["new"]
    assert state.gpu_free == 0


def test_a_request_needing_many_victims_on_one_node_still_finds_that_node() -> None:
    # 20 nodes of eight 1-GPU jobs; only n7 holds nothing but low-priority work, and its jobs are the
    # oldest, so the cheapest-first walk gives up and the node scan has to find it.
    running = []
    for n in range(20):
        for gpu in range(8):
            high = n != 7 and gpu == 0
            running.append(job(f"n{n}-{gpu}", "t", f"n{n}", (gpu,), priority=9 if high else 0,
                               started_at=10.0 if n == 7 else 5_000.0 + n))
    state = full_state(running, nodes=20)
    result = plan(select_victims(state, running, Request("new", gpus_per_member=8, team="t", priority=5),
                                 ents({"t": 0}, running, capacity=160), now=NOW, min_runtime_s=0))
    assert result.placement.nodes == ("n7",)
    assert len(result.victims) == 8
