"""The incremental fair-share queue gives ``order_pending``'s order after any sequence of queue changes."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduling.engine.fair_queue import FairShareQueue
from scheduling.engine.fairshare import order_pending
from scheduling.engine.types import Entitlement, Request

TEAMS = ("a", "b", "c", "d")

# Few distinct values, so ties on ratio (idle teams, equal usage per share), priority and submission are common.
usages = st.dictionaries(st.sampled_from(TEAMS), st.sampled_from((0.0, 1.0, 2.0, 4.0)))
shares = st.dictionaries(
    st.sampled_from(TEAMS),
    st.one_of(st.sampled_from((0.0, 1.0, 2.0)),
              st.builds(lambda fair, floor: Entitlement(team="", guaranteed=floor, fair_share=fair, limit=10.0,
                                                       demand=0.0, allocation=0.0),
                        st.sampled_from((0.0, 1.0, 2.0)), st.sampled_from((0.0, 2.0)))),
)
events = st.lists(
    st.one_of(
        st.tuples(st.just("add"), st.sampled_from(TEAMS), st.integers(-1, 1), st.sampled_from((0.0, 5.0, 9.0))),
        st.tuples(st.just("remove"), st.integers(0, 1_000)),
        st.tuples(st.just("order"), usages, shares),
    ),
    max_size=60,
)


@settings(max_examples=300, deadline=None)
@given(events)
def test_the_incremental_order_equals_a_full_sort_after_any_events(script: list[tuple[object, ...]]) -> None:
    queue: FairShareQueue[Request] = FairShareQueue()
    queued: list[Request] = []
    for number, event in enumerate(script):
        if event[0] == "add":
            _kind, team, priority, submitted = event
            request = Request(f"j{number:03d}", team=str(team), priority=int(priority),  # type: ignore[call-overload]
                              submitted_at=float(submitted))  # type: ignore[arg-type]
            queue.add(request, request)
            queued.append(request)
        elif event[0] == "remove" and queued:
            request = queued.pop(int(event[1]) % len(queued))  # type: ignore[call-overload]
            queue.remove(request)
        elif event[0] == "order":
            _kind, usage, share = event
            assert queue.ordered(usage, share) == list(order_pending(queued, usage, share))  # type: ignore[arg-type]
        assert len(queue) == len(queued)
    assert queue.ordered({}, {}) == list(order_pending(queued, {}, {}))


def test_removing_what_is_not_queued_fails_and_adding_twice_fails() -> None:
    queue: FairShareQueue[str] = FairShareQueue()
    request = Request("x", team="a")
    with pytest.raises(KeyError):
        queue.remove(request)
    queue.add(request, "x")
    with pytest.raises(ValueError, match="already queued"):
        queue.add(request, "x")
    queue.remove(request)
    assert len(queue) == 0 and queue.ordered({}, {}) == []
