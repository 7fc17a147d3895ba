"""Promises against an independent oracle: a max-flow over promises and GPU models at every instant."""

from __future__ import annotations

from collections import deque
from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from scheduling.engine.promises import Promise, check_promise, earliest_fit, worsened

T0 = datetime(2027, 1, 1, tzinfo=UTC)
HOUR = timedelta(hours=1)
MODELS = ("A100", "H100", "L40S")
UNBOUNDED = 10**9


def _max_flow(capacity: list[list[int]], source: int, sink: int) -> int:
    """Edmonds-Karp on a dense residual matrix: small, slow and obviously right."""
    residual = [row[:] for row in capacity]
    total = 0
    while True:
        parent = [-1] * len(residual)
        parent[source] = source
        frontier = deque([source])
        while frontier and parent[sink] < 0:
            here = frontier.popleft()
            for there, left in enumerate(residual[here]):
                if left > 0 and parent[there] < 0:
                    parent[there] = here
                    frontier.append(there)
        if parent[sink] < 0:
            return total
        path, node = [], sink
        while node != source:
            path.append((parent[node], node))
            node = parent[node]
        push = min(residual[a][b] for a, b in path)
        for a, b in path:
            residual[a][b] -= push
            residual[b][a] += push
        total += push


def _served(supply: dict[str, int], active: list[Promise]) -> int:
    """Most promised GPUs real GPUs can serve at once: source -> promise -> allowed model -> sink."""
    models = sorted(set(supply) | {p.gpu_model for p in active if p.gpu_model})
    size = 2 + len(active) + len(models)
    sink = size - 1
    capacity = [[0] * size for _ in range(size)]
    for i, promise in enumerate(active, start=1):
        capacity[0][i] = promise.gpus
        for j, model in enumerate(models, start=1 + len(active)):
            if promise.gpu_model in ("", model):
                capacity[i][j] = UNBOUNDED
    for j, model in enumerate(models, start=1 + len(active)):
        capacity[j][sink] = supply.get(model, 0)
    return _max_flow(capacity, 0, sink)


def _active(promises: list[Promise], moment: datetime) -> list[Promise]:
    return [
        p
        for p in promises
        if (p.starts_at is None or p.starts_at <= moment) and (p.ends_at is None or moment < p.ends_at)
    ]


def _moments(promises: list[Promise]) -> set[datetime]:
    """Every instant where the active set can change, and one before them all."""
    found = {T0 - HOUR}
    for p in promises:
        found |= {m for m in (p.starts_at, p.ends_at) if m is not None}
    return found


def _fits_by_oracle(supply: dict[str, int], promises: list[Promise], candidate: Promise) -> bool:
    """The candidate fits when, at every instant of its period, max flow grows by all of its GPUs."""
    for moment in _moments([*promises, candidate]):
        if not [p for p in _active([candidate], moment)]:
            continue
        before = _served(supply, _active(promises, moment))
        if _served(supply, _active([*promises, candidate], moment)) != before + candidate.gpus:
            return False
    return True


def _all_servable(supply: dict[str, int], promises: list[Promise]) -> bool:
    return all(
        _served(supply, active) == sum(p.gpus for p in active)
        for active in (_active(promises, m) for m in _moments(promises))
    )


fleets = st.lists(st.integers(0, 48), min_size=1, max_size=3).map(lambda sizes: dict(zip(MODELS, sizes, strict=False)))


@st.composite
def promises(draw: st.DrawFn, models: tuple[str, ...], standing: bool = False) -> Promise:
    gpus = draw(st.integers(1, 40))
    model = draw(st.sampled_from(("", "", *models, "B200")))  # B200: a model the fleet lacks
    if standing and draw(st.booleans()):
        return Promise(gpus, model, T0, None)  # a standing guarantee from now on
    start = T0 + draw(st.integers(0, 30)) * HOUR
    return Promise(gpus, model, start, start + draw(st.integers(1, 20)) * HOUR)


@st.composite
def histories(draw: st.DrawFn) -> tuple[dict[str, int], list[Promise]]:
    supply = draw(fleets)
    return supply, draw(st.lists(promises(tuple(supply), standing=True), max_size=12))


@settings(max_examples=300, deadline=None)
@given(histories())
def test_after_any_sequence_of_approvals_every_instant_has_an_assignment(
    history: tuple[dict[str, int], list[Promise]],
) -> None:
    supply, requests = history
    approved: list[Promise] = []
    for request in requests:
        result = check_promise(supply, approved, request)
        # Refused exactly when accepting would leave some instant without an assignment.
        assert result.fits == _all_servable(supply, [*approved, request])
        assert result.fits or (result.shortfalls and all(s.promised > s.supply for s in result.shortfalls))
        if result.fits:
            approved.append(request)
        assert _all_servable(supply, approved)


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_the_room_is_exactly_the_most_that_fits_even_on_a_fleet_already_short(data: st.DataObject) -> None:
    supply = data.draw(fleets)
    models = tuple(supply)
    existing = data.draw(st.lists(promises(models, standing=True), max_size=8))  # not checked: may be short
    candidate = data.draw(promises(models))
    result = check_promise(supply, existing, candidate)
    assert result.fits == _fits_by_oracle(supply, existing, candidate)
    at_room = Promise(result.room, candidate.gpu_model, candidate.starts_at, candidate.ends_at)
    beyond = Promise(result.room + 1, candidate.gpu_model, candidate.starts_at, candidate.ends_at)
    assert _fits_by_oracle(supply, existing, at_room)
    assert not _fits_by_oracle(supply, existing, beyond)


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_an_edit_of_standing_promises_passes_only_if_no_instant_loses_service(data: st.DataObject) -> None:
    supply = data.draw(fleets)
    models = tuple(supply)
    grants = data.draw(st.lists(promises(models), max_size=6))
    standing = st.lists(st.builds(Promise, st.integers(1, 30), st.sampled_from(("", *models))), max_size=3)
    before, after = grants + data.draw(standing), grants + data.draw(standing)
    blamed = worsened(supply, before, after, T0)
    for moment in (_moments(before + after) - {T0 - HOUR}) | {T0}:
        unserved = [
            sum(p.gpus for p in _active(s, moment)) - _served(supply, _active(s, moment)) for s in (before, after)
        ]
        assert blamed or unserved[1] <= unserved[0]
    if _all_servable(supply, before):
        assert (not blamed) == _all_servable(supply, after)


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_the_earliest_fit_is_the_first_start_the_oracle_accepts(data: st.DataObject) -> None:
    """Every boundary lies on the hour here, so checking each hour by the oracle finds the earliest start too."""
    supply = data.draw(fleets)
    existing = data.draw(st.lists(promises(tuple(supply), standing=True), max_size=8))
    candidate = data.draw(promises(tuple(supply)))
    latest = candidate.starts_at + data.draw(st.integers(0, 40)) * HOUR
    found = earliest_fit(supply, existing, candidate, latest)
    length = candidate.ends_at - candidate.starts_at
    starts = [candidate.starts_at + i * HOUR for i in range(int((latest - candidate.starts_at) / HOUR) + 1)]
    fitting = [s for s in starts if _fits_by_oracle(supply, existing, Promise(candidate.gpus, candidate.gpu_model, s,
                                                                                s + length))]
    assert found == (fitting[0] if fitting else None)
