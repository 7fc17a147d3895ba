"""A capacity probe that gives up early (``P95CertainlyAbove``) only does so when the full replay's p95
really is above the bound, leaves every other replay untouched, and so never changes a search's answer."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from scheduling.simulation import simulate_replay
from scheduling.simulation.capacity import P95CertainlyAbove, smallest_capacity, target_measure
from scheduling.traces import read_philly
from scheduling.traces.records import Trace

DEMO_SLICE = Path(__file__).resolve().parents[2] / "scheduling" / "demo_data" / "philly_slice.csv"
BOUND_H = 2.0


@pytest.fixture(scope="module")
def sample() -> Trace:
    trace = read_philly(DEMO_SLICE)
    return replace(trace, jobs=trace.jobs[:800])


def _comparable(figures: dict[str, object]) -> str:
    return json.dumps({key: value for key, value in figures.items() if key != "wall_time_s"}, sort_keys=True)


@pytest.mark.parametrize("target", ["fleet", "every-team"])
@pytest.mark.parametrize("policy", ["federated", "siloed"])
def test_a_probe_gives_up_only_when_the_full_replay_misses_the_bound(sample: Trace, target: str, policy: str) -> None:
    value_of = target_measure(target)
    outcomes = set()
    for capacity in (64, 128, 256, 384, 768):
        full = simulate_replay(sample, policy, capacity_gpus=capacity).figures
        early = simulate_replay(sample, policy, capacity_gpus=capacity,
                                give_up=P95CertainlyAbove(BOUND_H, target)).figures
        if early.get("stopped_early_s") is None:
            assert _comparable(early) == _comparable(full)
            outcomes.add("ran to the end")
        else:
            assert value_of(full) > BOUND_H
            assert value_of(early) > BOUND_H
            assert early["jobs"] != full["jobs"]  # a partial run: some jobs had not finished when it stopped
            outcomes.add("gave up")
    assert outcomes == {"ran to the end", "gave up"}  # the capacities straddle the bound


def test_the_search_finds_the_same_capacity_with_and_without_giving_up(sample: Trace) -> None:
    def measure(give_up: bool):  # type: ignore[no-untyped-def]
        def run(capacity: int) -> float:
            stop = P95CertainlyAbove(BOUND_H, "every-team") if give_up else None
            figures = simulate_replay(sample, "federated", capacity_gpus=capacity, give_up=stop).figures
            return target_measure("every-team")(figures)
        return run

    exact = smallest_capacity(measure(False), low=64, high=512, step=32, target=BOUND_H)
    early = smallest_capacity(measure(True), low=64, high=512, step=32, target=BOUND_H)
    assert (early.capacity_gpus, early.largest_failing_gpus) == (exact.capacity_gpus, exact.largest_failing_gpus)
    assert [capacity for capacity, _ in early.probes] == [capacity for capacity, _ in exact.probes]


def test_a_replay_with_a_horizon_never_gives_up(sample: Trace) -> None:
    end = max(job.submit_s for job in sample.jobs)
    figures = simulate_replay(sample, "federated", capacity_gpus=40, horizon_s=end,
                              give_up=P95CertainlyAbove(0.0, "fleet")).figures
    assert "stopped_early_s" not in figures
