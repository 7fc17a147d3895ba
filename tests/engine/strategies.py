"""Hypothesis strategies for small random fleets and requests."""

from __future__ import annotations

from hypothesis import strategies as st

from scheduling.engine.types import Node, Request, TopologyLevel

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
