"""Capacity bisection: smallest whole-step capacity meeting a wait target, with every probe recorded."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from scheduling.simulation import simulate_replay
from scheduling.simulation.capacity import (
    CEILING_FACTOR,
    TargetUnreachable,
    fleet_p95_wait_h,
    smallest_capacity,
    smallest_capacity_in_rounds,
    target_measure,
    team_p95_waits_h,
)
from scheduling.simulation.stats import percentile, percentile_counting_misses
from scheduling.traces import load_trace
from scheduling.traces.records import Trace


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


@pytest.mark.parametrize("width", [1, 3])
def test_a_target_no_fleet_meets_ends_with_an_error_not_ever_larger_replays(width: int) -> None:
    probed: list[int] = []

    def never(capacities):  # type: ignore[no-untyped-def]
        probed.extend(capacities)
        return [math.inf for _ in capacities]  # e.g. a team's jobs ask for a GPU model the fleet lacks

    with pytest.raises(TargetUnreachable, match=r"no capacity up to \d+ GPUs .* meets the target 1 h"):
        smallest_capacity_in_rounds(never, low=64, high=256, step=32, width=width)
    assert max(probed) <= 256 * CEILING_FACTOR  # never above the ceiling
    assert len(probed) <= 20


def test_a_bad_bracket_is_refused() -> None:
    with pytest.raises(ValueError, match="low <= high"):
        smallest_capacity(falling_wait(10), low=100, high=50)


# Real replays for the targets: four 1-GPU jobs of team "small" and one 2 x 8-GPU gang of team "wide", which
# one 8-GPU node can never host (rejected) and two nodes start once the small jobs are done (10 min).
TWO_TEAMS = (
    "id,submit_time,duration,gang_size,gpus_per_member,gpu_model,team,kind\n"
    + "".join(f"s{i},0,600,1,1,,small,batch\n" for i in range(4))
    + "w1,0,600,2,8,,wide,training\n"
)


@pytest.fixture
def two_teams(tmp_path: Path) -> Trace:
    path = tmp_path / "two_teams.csv"
    path.write_text(TWO_TEAMS, encoding="utf-8")
    return load_trace(str(path))


def replay_figures(trace: Trace):  # type: ignore[no-untyped-def]
    return lambda capacity: simulate_replay(trace, "best-fit", capacity_gpus=capacity).figures


def test_a_rejected_job_is_an_infinite_wait_for_its_team_only(two_teams: Trace) -> None:
    figures = replay_figures(two_teams)(8)

    assert figures["jobs"]["rejected"] == 1
    assert team_p95_waits_h(figures) == {"small": 0.0, "wide": math.inf}
    assert fleet_p95_wait_h(figures) == 0.0  # the fleet-wide p95 ignores the rejected job
    assert figures["teams"]["wide"]["wait_p95_hours_counting_unstarted"] is None  # JSON null = infinite


def test_every_team_target_needs_the_fleet_that_runs_every_team(two_teams: Trace) -> None:
    run = replay_figures(two_teams)

    fleet = smallest_capacity(lambda c: fleet_p95_wait_h(run(c)), low=8, high=32, step=8)
    every_team = smallest_capacity(lambda c: target_measure("every-team")(run(c)), low=8, high=32, step=8)

    assert fleet.capacity_gpus == 8
    assert every_team.capacity_gpus == 16
    assert (8, math.inf) in every_team.probes
    assert team_p95_waits_h(run(16))["wide"] == pytest.approx(600 / 3600)  # waited for the small jobs


def test_an_unknown_target_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match=r"'median'.*fleet, every-team"):
        target_measure("median")


@pytest.mark.parametrize(
    ("values", "misses", "expected"),
    [
        ([1.0, 2.0, 3.0], 0, percentile([1.0, 2.0, 3.0], 95)),
        ([float(i) for i in range(99)], 1, 94.05),  # the p95 lies below the one miss
        ([float(i) for i in range(19)], 1, math.inf),  # interpolates towards the miss
        ([], 2, math.inf),
        ([], 0, None),
    ],
)
def test_the_percentile_counts_misses_as_infinite(values: list[float], misses: int, expected: float | None) -> None:
    result = percentile_counting_misses(values, misses, 95)
    assert result == (pytest.approx(expected) if expected is not None and math.isfinite(expected) else expected)


@pytest.mark.parametrize("width", [2, 3, 4])
@pytest.mark.parametrize("threshold", [8, 40, 752, 790, 1504, 1505, 5000])
def test_wider_rounds_find_the_serial_answer_in_fewer_rounds(width: int, threshold: int) -> None:
    serial = smallest_capacity(falling_wait(threshold), low=752, high=1504, step=8)
    rounds: list[list[int]] = []

    def measure_many(capacities):  # type: ignore[no-untyped-def]
        rounds.append(list(capacities))
        return [falling_wait(threshold)(capacity) for capacity in capacities]

    wide = smallest_capacity_in_rounds(measure_many, low=752, high=1504, step=8, width=width)

    assert (wide.capacity_gpus, wide.largest_failing_gpus) == (serial.capacity_gpus, serial.largest_failing_gpus)
    assert all(len(batch) <= width for batch in rounds)
    assert len(rounds) < len(serial.probes)


def test_width_one_probes_exactly_as_the_serial_bisection() -> None:
    serial = smallest_capacity(falling_wait(1000), low=752, high=1504, step=8)
    rounds = smallest_capacity_in_rounds(
        lambda capacities: [falling_wait(1000)(c) for c in capacities], low=752, high=1504, step=8, width=1
    )
    assert rounds.probes == serial.probes


def test_a_ceiling_at_high_makes_high_a_hard_bound() -> None:
    probed: list[int] = []

    def never(capacities):  # type: ignore[no-untyped-def]
        probed.extend(capacities)
        return [math.inf for _ in capacities]

    with pytest.raises(TargetUnreachable, match=r"no capacity up to 256 GPUs \(the search's ceiling\) meets"):
        smallest_capacity_in_rounds(never, low=64, high=256, step=32, ceiling=256)
    assert probed == [64, 256]  # the low end, then the high end once: no doubling past it
    with pytest.raises(ValueError, match=r"ceiling \(128 GPUs\) is below the bracket's high end"):
        smallest_capacity_in_rounds(never, low=64, high=256, step=32, ceiling=128)


@pytest.mark.parametrize("threshold", [40, 752, 1504])
def test_a_ceiling_the_answer_lies_under_changes_nothing(threshold: int) -> None:
    free = smallest_capacity(falling_wait(threshold), low=752, high=1504, step=32)
    bounded = smallest_capacity_in_rounds(
        lambda capacities: [falling_wait(threshold)(c) for c in capacities], low=752, high=1504, step=32, ceiling=1504
    )
    assert bounded == free
