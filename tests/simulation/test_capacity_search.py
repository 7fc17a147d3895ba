"""Capacity bisection: smallest whole-step capacity meeting a wait target, with every probe recorded."""

from __future__ import annotations

import pytest

from scheduling.simulation.capacity import smallest_capacity


def falling_wait(threshold: int):  # type: ignore[no-untyped-def]
    """p95 wait that meets 1 h from ``threshold`` GPUs on (a stand-in for a replay: waits fall with capacity)."""
    return lambda capacity: 0.5 if capacity >= threshold else 3.0 + (threshold - capacity) / 100


@pytest.mark.parametrize("threshold", [40, 752, 790, 1504, 1505, 5000])
def test_the_search_finds_the_smallest_step_that_meets_the_target(threshold: int) -> None:
    search = smallest_capacity(falling_wait(threshold), low=752, high=1504, step=32)
    assert search.capacity_gpus % 32 == 0
    assert search.capacity_gpus >= threshold > search.largest_failing_gpus
    assert search.capacity_gpus - 32 < threshold or search.capacity_gpus == 32
    assert (search.capacity_gpus, 0.5) in search.probes


def test_probes_are_few_for_a_wide_bracket() -> None:
    search = smallest_capacity(falling_wait(1000), low=752, high=1504, step=8)
    assert len(search.probes) <= 10


def test_a_bad_bracket_is_refused() -> None:
    with pytest.raises(ValueError, match="low <= high"):
        smallest_capacity(falling_wait(10), low=100, high=50)
