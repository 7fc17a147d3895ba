"""engine.wait_advice: the cross-fleet next steps for a waiting workload, as properties over random pools."""

from hypothesis import given, settings
from hypothesis import strategies as st

from scheduling.engine.placement import ClusterState
from scheduling.engine.startplan import PoolSnapshot
from scheduling.engine.types import Node, Placement, Request
from scheduling.engine.wait_advice import Borrower, fitting_shapes, free_elsewhere, guarantee_advice

FREE = st.lists(st.integers(0, 8), min_size=1, max_size=8)  # free whole GPUs per 8-GPU node


def _nodes(free: list[int], pool: str = "a") -> tuple[Node, ...]:
    return tuple(
        Node(f"{pool}{i}", 8, gpu_free_milli=(1000,) * f + (0,) * (8 - f), orchestrator=pool)
        for i, f in enumerate(free)
    )


@settings(max_examples=150, deadline=None)
@given(free=FREE, members=st.integers(1, 4), per=st.sampled_from([2, 4, 8]))
def test_every_shape_offered_holds_the_same_gpus_in_smaller_members_and_places_now(free, members, per):
    request = Request("r", members=members, gpus_per_member=per)
    state = ClusterState(_nodes(free))
    advice = fitting_shapes(request, state)
    for m, g in advice.shapes if advice else ():
        assert m * g == members * per and g < per
        assert isinstance(state.place(Request("s", members=m, gpus_per_member=g)), Placement)


@settings(max_examples=150, deadline=None)
@given(here=FREE, there=FREE, per=st.sampled_from([1, 2, 4, 8]), cap=st.one_of(st.none(), st.integers(0, 64)))
def test_a_route_elsewhere_is_offered_only_where_it_places_within_the_cap(here, there, per, cap):
    request = Request("r", gpus_per_member=per, team="nlp")
    caps = {} if cap is None else {"nlp": float(cap)}
    pools = {"a": PoolSnapshot("a", _nodes(here)), "b": PoolSnapshot("b", _nodes(there, "b"), team_cap=caps)}
    advice = free_elsewhere(request, pools, "a")
    fits = isinstance(ClusterState(_nodes(there, "b")).place(request), Placement) and (cap is None or per <= cap)
    assert (advice is not None) == fits and (advice is None or advice.orchestrator == "b")


@given(guaranteed=st.integers(0, 64), held=st.integers(0, 64), lent=st.integers(0, 64))
def test_guarantee_advice_only_when_short_and_others_borrow(guaranteed, held, lent):
    borrowers = [Borrower("production", lent)] if lent else []
    advice = guarantee_advice(guaranteed=guaranteed, held=held, borrowers=borrowers, reclaim_at=None)
    assert (advice is not None) == (held < guaranteed and lent > 0)
    if advice is not None:
        assert "no reclaim is scheduled yet" in advice.message and f"{held} of its {guaranteed}" in advice.message


def test_the_reclaim_time_is_said_as_the_caller_labels_it():
    advice = guarantee_advice(
        guaranteed=8, held=0, borrowers=[Borrower("production", 40)], reclaim_at=1.0, reclaim_label="14:05 UTC"
    )
    assert advice is not None and advice.message.endswith("reclaim expected by 14:05 UTC")
