"""Hypothesis strategies for small random fleets and requests."""

from __future__ import annotations

from hypothesis import strategies as st

from scheduling.engine.placement import ClusterState
from scheduling.engine.types import MemberAssignment, Node, Placement, Request, RunningWorkload, TopologyLevel

MODELS = ("A100", "H100")


@st.composite
def nodes(draw: st.DrawFn, index: int) -> Node:
    total = draw(st.sampled_from((4, 8)))
    free = tuple(draw(st.lists(st.sampled_from((0, 250, 500, 1000, 1000, 1000)), min_size=total,
                               max_size=total)))
    cpu = draw(st.sampled_from((0, 16000)))
    leaf = draw(st.integers(0, 2))
    return Node(
        name=f"n{index}", gpu_total=total, gpu_model=draw(st.sampled_from(MODELS)), gpu_free_milli=free,
        cpu_milli_total=cpu, cpu_milli_free=cpu, nvlink_domain=f"n{index}", leaf_switch=f"leaf{leaf}",
        spine=f"spine{leaf // 2}", schedulable=draw(st.booleans().map(lambda b: b or index % 3 != 0)),
    )


@st.composite
def fleets(draw: st.DrawFn, max_nodes: int = 10) -> list[Node]:
    count = draw(st.integers(1, max_nodes))
    return [draw(nodes(i)) for i in range(count)]


@st.composite
def requests(draw: st.DrawFn, index: int = 0) -> Request:
    fractional = draw(st.booleans().map(lambda b: b and draw(st.integers(0, 3)) == 0))
    return Request(
        id=f"r{index}",
        members=draw(st.integers(1, 5)),
        gpus_per_member=0 if fractional else draw(st.sampled_from((1, 2, 4, 8))),
        gpu_milli=draw(st.sampled_from((250, 500))) if fractional else 0,
        gpu_models=draw(st.sampled_from((frozenset(), frozenset({"A100"}), frozenset({"H100"})))),
        cpu_milli=draw(st.sampled_from((0, 0, 4000))),
        topology=draw(st.sampled_from(list(TopologyLevel))),
        topology_required=draw(st.booleans()),
        priority=draw(st.integers(0, 3)),
    )


@st.composite
def busy_fleets(
    draw: st.DrawFn, teams: tuple[str, ...], starts: tuple[float, ...], priorities: int = 4
) -> tuple[ClusterState, list[RunningWorkload]]:
    """3 DGX nodes filled by random 1/2/4-GPU jobs of random ``teams``, some in two-member gangs spanning
    nodes, each started at one of ``starts`` (so some sit inside a minimum runtime)."""
    state = ClusterState([Node(f"n{i}", 8, "H100", nvlink_domain=f"n{i}", leaf_switch="leaf-0", spine="spine-0")
                          for i in range(3)])
    running: list[RunningWorkload] = []
    for i in range(draw(st.integers(1, 14))):
        size = draw(st.sampled_from((1, 2, 4)))
        members = draw(st.sampled_from((1, 1, 2)))
        request = Request(f"w{i}", members=members, gpus_per_member=size)
        placement = state.place(request, "first-fit")
        if not isinstance(placement, Placement):
            continue
        state.commit(placement, request)
        team = draw(st.sampled_from(teams))
        priority = draw(st.integers(0, priorities))
        started = draw(st.sampled_from(starts))
        for member in placement.assignments:
            running.append(RunningWorkload(f"w{i}.{member.member}", team, float(size),
                                           (MemberAssignment(0, member.node, member.gpu_indices),),
                                           priority=priority, started_at=started, gang_id=f"w{i}"))
    return state, running
