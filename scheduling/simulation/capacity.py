"""Capacity planning: the smallest fleet whose queue-wait percentile stays within a target.

``smallest_capacity`` bisects over capacities in whole steps (8-GPU nodes by default): the lower end is
halved until it misses the target, the upper end doubled until it meets it, then the bracket is halved
until it is one step wide. It assumes the wait percentile does not grow with capacity, and checks that
only at the probed points (each probe is a full replay, so every probe is returned for the record).

Two targets read a replay's figures: ``fleet_p95_wait_h`` (all started jobs together, the original
target) and ``worst_team_p95_wait_h`` ("every team's p95 wait <= X"): each team's p95 counts its rejected
and never-started jobs as infinite waits, so a fleet that rejects a team's jobs never meets the target.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

TARGET_P95_WAIT_H = 1.0
TARGETS = ("fleet", "every-team")


@dataclass(frozen=True)
class CapacitySearch:
    capacity_gpus: int
    """Smallest probed capacity that meets the target."""
    largest_failing_gpus: int
    """Largest probed capacity that misses it (0 if even one step meets it)."""
    step_gpus: int
    target: float
    probes: tuple[tuple[int, float], ...] = field(default=())
    """(capacity, measured value) in probing order."""


def smallest_capacity(
    measure: Callable[[int], float], *, low: int, high: int, step: int = 32, target: float = TARGET_P95_WAIT_H,
) -> CapacitySearch:
    """Smallest multiple of ``step`` GPUs with ``measure(capacity) <= target`` (bracket ``low``..``high``)."""
    if step <= 0 or low <= 0 or high < low:
        raise ValueError("capacity search needs 0 < low <= high and a positive step")
    probes: list[tuple[int, float]] = []

    def meets(units: int) -> bool:
        value = measure(units * step)
        probes.append((units * step, value))
        return value <= target

    low_units, high_units = max(1, low // step), max(1, -(-high // step))
    high_met = False  # halving leaves high_units at a size just measured to meet the target
    while low_units > 1 and meets(low_units):  # the lower end must miss the target
        low_units, high_units, high_met = low_units // 2, low_units, True
    if low_units == 1 and meets(1):
        return CapacitySearch(step, 0, step, target, tuple(probes))
    while not high_met and not meets(high_units):
        low_units, high_units = high_units, high_units * 2
    while high_units - low_units > 1:
        middle = (low_units + high_units) // 2
        if meets(middle):
            high_units = middle
        else:
            low_units = middle
    return CapacitySearch(high_units * step, low_units * step, step, target, tuple(probes))


def fleet_p95_wait_h(figures: Mapping[str, Any]) -> float:
    """p95 wait of every started job of the replay (rejected jobs not counted), 0 for none."""
    return float(figures["wait_hours"]["all"]["p95"] or 0.0)


def team_p95_waits_h(figures: Mapping[str, Any]) -> dict[str, float]:
    """Each team's p95 wait counting rejected and never-started jobs as infinite (``math.inf``)."""
    teams = figures["teams"]
    return {
        team: math.inf if row["wait_p95_hours_counting_unstarted"] is None else row["wait_p95_hours_counting_unstarted"]
        for team, row in teams.items()
    }


def worst_team_p95_wait_h(figures: Mapping[str, Any]) -> float:
    """The largest per-team p95 (``team_p95_waits_h``): the value "every team's p95 <= X" compares."""
    return max(team_p95_waits_h(figures).values(), default=0.0)


def target_measure(target: str) -> Callable[[Mapping[str, Any]], float]:
    """The figure a capacity search compares with its bound, by name (``TARGETS``)."""
    if target == "fleet":
        return fleet_p95_wait_h
    if target == "every-team":
        return worst_team_p95_wait_h
    raise ValueError(f"capacity target {target!r}: expected one of {', '.join(TARGETS)}")
