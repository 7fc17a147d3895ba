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
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from scheduling.simulation.runner import default_capacity

TARGET_P95_WAIT_H = 1.0
TARGETS = ("fleet", "every-team")
# The upper end is doubled at most up to this many times the bracket's ``high``: a target that no fleet
# meets (a team's jobs rejected for a GPU model the synthetic fleet lacks count as infinite waits at every
# size) must end in an answer, not in ever larger replays.
CEILING_FACTOR = 64


class TargetUnreachable(ValueError):
    """No probed capacity up to the ceiling meets the target."""


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
    measure: Callable[[int], float],
    *,
    low: int,
    high: int,
    step: int = 32,
    target: float = TARGET_P95_WAIT_H,
) -> CapacitySearch:
    """Smallest multiple of ``step`` GPUs with ``measure(capacity) <= target`` (bracket ``low``..``high``)."""
    return smallest_capacity_in_rounds(
        lambda capacities: [measure(capacity) for capacity in capacities], low=low, high=high, step=step, target=target
    )


def smallest_capacity_in_rounds(
    measure_many: Callable[[Sequence[int]], Sequence[float]],
    *,
    low: int,
    high: int,
    step: int = 32,
    target: float = TARGET_P95_WAIT_H,
    width: int = 1,
    ceiling: int | None = None,
) -> CapacitySearch:
    """``smallest_capacity`` probing up to ``width`` capacities per round (one round = one fan-out).

    Width 1 is the serial bisection, probe for probe. Wider rounds split the bracket into ``width + 1``
    parts; for a wait that does not grow with capacity the answer is the same, in fewer rounds.
    ``ceiling``: the largest capacity probed, in GPUs (default ``CEILING_FACTOR`` x ``high``); ``high`` itself
    makes ``high`` a hard upper bound (``TargetUnreachable`` once it misses).
    """
    if step <= 0 or low <= 0 or high < low or width < 1:
        raise ValueError("capacity search needs 0 < low <= high, a positive step and a width of at least 1")
    if ceiling is not None and ceiling < high:
        raise ValueError(f"capacity search: the ceiling ({ceiling} GPUs) is below the bracket's high end ({high})")
    probes: list[tuple[int, float]] = []
    high_ceiling = max(1, -(-high // step))
    ceiling_units = high_ceiling * CEILING_FACTOR if ceiling is None else max(high_ceiling, ceiling // step)
    ceiling_note = f"{CEILING_FACTOR}x the bracket's high end" if ceiling is None else "the search's ceiling"

    def meets(units: Sequence[int]) -> list[bool]:
        values = measure_many([unit * step for unit in units])
        probes.extend(zip([unit * step for unit in units], values, strict=True))
        return [value <= target for value in values]

    low_units, high_units = max(1, low // step), max(1, -(-high // step))
    halvings = [low_units >> shift for shift in range(low_units.bit_length())]  # low, low/2, ..., 1
    missed = _first(halvings, False, meets, width)  # the lower end must miss the target
    if missed is None:  # even one step meets it
        return CapacitySearch(step, 0, step, target, tuple(probes))
    if missed > 0:  # a halving met the target: it is the upper end
        low_units, high_units = halvings[missed], halvings[missed - 1]
    else:  # double the upper end until it meets the target (stops only when it does, as serially)
        low_units, high_units = _double_until_met(low_units, high_units, meets, width, ceiling_units)
        if high_units > ceiling_units:
            value = probes[-1][1]
            raise TargetUnreachable(
                f"no capacity up to {probes[-1][0]} GPUs ({ceiling_note}) meets the target "
                f"{target:g} h (measured {value:g} h there; rejected or never-started jobs count as infinite "
                f"waits, e.g. jobs asking for a GPU model the fleet lacks); probes: {probes}"
            )
    while high_units - low_units > 1:
        low_units, high_units = _narrow(low_units, high_units, meets, width)
    return CapacitySearch(high_units * step, low_units * step, step, target, tuple(probes))


Meets = Callable[[Sequence[int]], list[bool]]


def _first(units: Sequence[int], wanted: bool, meets: Meets, width: int) -> int | None:
    """Index of the first of ``units`` whose outcome is ``wanted``, probing ``width`` at a time."""
    for start in range(0, len(units), width):
        for offset, ok in enumerate(meets(units[start : start + width])):
            if ok is wanted:
                return start + offset
    return None


def _double_until_met(low_units: int, high_units: int, meets: Meets, width: int, ceiling_units: int) -> tuple[int, int]:
    """The bracket once the upper end meets the target; an upper end above ``ceiling_units`` if none did."""
    while high_units <= ceiling_units:
        chain = [high_units << shift for shift in range(width) if high_units << shift <= ceiling_units]
        met = _first(chain, True, meets, width)
        if met is not None:
            return (chain[met - 1] if met else low_units), chain[met]
        low_units, high_units = chain[-1], chain[-1] * 2
    return low_units, high_units


def _narrow(low_units: int, high_units: int, meets: Meets, width: int) -> tuple[int, int]:
    """One round: ``width`` cuts of the bracket; the smallest that meets and the largest below it that misses."""
    cuts = sorted({low_units + (high_units - low_units) * j // (width + 1) for j in range(1, width + 1)})
    cuts = [unit for unit in cuts if low_units < unit < high_units]
    outcomes = dict(zip(cuts, meets(cuts), strict=True))
    high_units = min([high_units, *(unit for unit, ok in outcomes.items() if ok)])
    low_units = max([low_units, *(unit for unit, ok in outcomes.items() if not ok and unit < high_units)])
    return low_units, high_units


def fleet_p95_wait_h(figures: Mapping[str, Any]) -> float:
    """p95 wait of every started job of the replay (rejected jobs not counted), 0 for none; infinite for a
    replay that gave up early (``p95_certainly_above`` proved the p95 above the bound)."""
    if figures.get("stopped_early_s") is not None:
        return math.inf
    return float(figures["wait_hours"]["all"]["p95"] or 0.0)


class P95CertainlyAbove:
    """``give_up`` for a replay probed against "p95 wait <= ``hours``": True once the p95 is sure to exceed it.

    Exact, not a heuristic. With n values the p95 interpolates from the ``k = floor(0.95 (n - 1))``-th
    smallest, so it exceeds the bound once ``n - k`` values do. A wait is known to exceed the bound as soon
    as a job has been queued longer than that (in a replay without a horizon every job that is not
    rejected starts), so jobs are counted as they pass ``now - bound``, in submission order, once each.
    ``fleet``: started jobs only; n is counted as every job of the trace (at least the started ones,
    which only raises the count needed). ``every-team``: per team, rejected jobs count as
    waits over the bound and n is all the team's jobs.
    """

    def __init__(self, hours: float, target: str) -> None:
        if target not in TARGETS:
            raise ValueError(f"capacity target {target!r}: expected one of {', '.join(TARGETS)}")
        self.bound_s = hours * 3600.0
        self.target = target
        self._order: list[Any] = []
        self._next = 0
        self._over: dict[str, int] = {}
        self._sizes: Counter[str] = Counter()

    def __call__(self, replay: Any) -> bool:
        if replay.horizon_s is not None:
            return False  # jobs queued at the horizon never start, so a long wait may not count
        if not self._order and replay.runs:
            self._order = sorted(replay.runs, key=lambda run: (run.job.submit_s, run.index))
            self._sizes = Counter(run.team for run in replay.runs)
        cutoff = replay.now - self.bound_s
        while self._next < len(self._order) and self._order[self._next].job.submit_s < cutoff:
            self._count(self._order[self._next])
            self._next += 1
        if self.target == "fleet":
            return _over_at_p95(self._over.get("", 0), len(replay.runs))
        return any(_over_at_p95(over, self._sizes[team]) for team, over in self._over.items())

    def _count(self, run: Any) -> None:
        waited = run.first_start is None or run.first_start - run.job.submit_s > self.bound_s
        if self.target == "fleet":
            if waited and not run.rejected:
                self._over[""] = self._over.get("", 0) + 1
        elif waited or run.rejected:
            self._over[run.team] = self._over.get(run.team, 0) + 1


def _over_at_p95(over: int, n: int) -> bool:
    return n > 0 and over >= n - math.floor((n - 1) * 95 / 100)  # the rank stats.percentile interpolates from


def team_p95_waits_h(figures: Mapping[str, Any]) -> dict[str, float]:
    """Each team's p95 wait counting rejected and never-started jobs as infinite (``math.inf``)."""
    teams = figures["teams"]
    return {
        team: math.inf if row["wait_p95_hours_counting_unstarted"] is None else row["wait_p95_hours_counting_unstarted"]
        for team, row in teams.items()
    }


def worst_team_p95_wait_h(figures: Mapping[str, Any]) -> float:
    """The largest per-team p95 (``team_p95_waits_h``): the value "every team's p95 <= X" compares
    (infinite for a replay that gave up early, see ``P95CertainlyAbove``)."""
    if figures.get("stopped_early_s") is not None:
        return math.inf
    return max(team_p95_waits_h(figures).values(), default=0.0)


def target_measure(target: str) -> Callable[[Mapping[str, Any]], float]:
    """The figure a capacity search compares with its bound, by name (``TARGETS``)."""
    if target == "fleet":
        return fleet_p95_wait_h
    if target == "every-team":
        return worst_team_p95_wait_h
    raise ValueError(f"capacity target {target!r}: expected one of {', '.join(TARGETS)}")


def default_bracket(jobs: Sequence[Any], step: int) -> tuple[int, int]:
    """``low``, ``high`` for a search on a synthetic fleet when none is given, in whole steps: the trace's mean
    GPU demand (half the replay's default capacity, ``runner.default_capacity``), and four times that
    default capacity (eight times the mean demand), at least the largest job and at least ``low``."""
    replay_default = default_capacity(jobs)
    low = max(step, replay_default // 2 // step * step)
    largest = max((math.ceil(job.gpus) for job in jobs), default=0)
    high = max(low, -(-max(4 * replay_default, largest) // step) * step)
    return low, high
