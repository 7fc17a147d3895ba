"""Pool-policy calendars: which floor and ceiling apply to each orchestrator at a local weekday and minute.

The caller converts "now" to the portal's time zone and passes the ISO weekday (1 = Monday) and the
minute of the day: this module never reads a clock. A window whose end is before its start runs
overnight into the next day (``weekdays`` names the day it *starts*); ``start == end`` means all day.
Where rules of one orchestrator overlap, the higher ``precedence`` wins; two overlapping rules of the
same orchestrator and the same precedence are ambiguous and ``check_rules`` rejects them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

MINUTES_PER_DAY = 24 * 60
WEEKDAYS = (1, 2, 3, 4, 5, 6, 7)
DAY_NAMES = {1: "Mon", 2: "Tue", 3: "Wed", 4: "Thu", 5: "Fri", 6: "Sat", 7: "Sun"}


@dataclass(frozen=True, slots=True)
class PolicyRule:
    """One calendar rule (a ``PoolPolicy`` row): in its window, ``orchestrator`` holds at least
    ``floor_gpus`` and at most ``ceiling_gpus`` (None: no ceiling)."""

    name: str
    orchestrator: str
    weekdays: frozenset[int]
    start_minute: int
    end_minute: int
    floor_gpus: int = 0
    ceiling_gpus: int | None = None
    lendable: bool = True
    precedence: int = 0

    def covers(self, weekday: int, minute: int) -> bool:
        """Is the rule in effect at ``minute`` (0..1439) of ISO ``weekday``?"""
        start, end = self.start_minute, self.end_minute
        if start == end:
            return weekday in self.weekdays
        if start < end:
            return weekday in self.weekdays and start <= minute < end
        yesterday = 7 if weekday == 1 else weekday - 1
        return (weekday in self.weekdays and minute >= start) or (yesterday in self.weekdays and minute < end)


@dataclass(frozen=True, slots=True)
class Bounds:
    """What the calendar asks of one orchestrator at one moment (no rule: floor 0, no ceiling)."""

    orchestrator: str
    floor_gpus: int = 0
    ceiling_gpus: int | None = None
    lendable: bool = True
    rule: str = ""


@dataclass(frozen=True, slots=True)
class RuleProblem:
    """A reason to reject a set of rules: the form field it concerns and the rules involved."""

    field: str
    message: str
    rules: tuple[str, ...] = ()


def bounds_at(rules: Iterable[PolicyRule], weekday: int, minute: int) -> dict[str, Bounds]:
    """The winning rule per orchestrator at that moment (highest precedence, then name for determinism)."""
    winners: dict[str, PolicyRule] = {}
    for rule in rules:
        if not rule.covers(weekday, minute):
            continue
        best = winners.get(rule.orchestrator)
        if best is None or (rule.precedence, best.name) > (best.precedence, rule.name):
            winners[rule.orchestrator] = rule
    return {
        name: Bounds(name, r.floor_gpus, r.ceiling_gpus, r.lendable, r.name) for name, r in sorted(winners.items())
    }


def _moments(rules: Sequence[PolicyRule]) -> list[tuple[int, int]]:
    """Every (weekday, minute) at which some rule starts or ends: effective bounds are constant between them."""
    minutes = sorted({0, *(r.start_minute for r in rules), *(r.end_minute for r in rules)})
    return [(day, minute) for day in WEEKDAYS for minute in minutes if minute < MINUTES_PER_DAY]


def describe_moment(weekday: int, minute: int) -> str:
    return f"{DAY_NAMES[weekday]} {minute // 60:02d}:{minute % 60:02d}"


def check_rules(rules: Sequence[PolicyRule], capacity_gpus: Mapping[str, int] | int) -> tuple[RuleProblem, ...]:
    """Every reason the rules cannot all hold: bad fields, ambiguous overlaps, floors above the fleet.

    ``capacity_gpus`` is the fleet's GPUs the floors share (an int), or per orchestrator the GPUs it
    could own at most (shared pool plus its pinned nodes); then the sum is checked against their total.
    """
    problems: list[RuleProblem] = []
    total = capacity_gpus if isinstance(capacity_gpus, int) else sum(capacity_gpus.values())
    for rule in rules:
        problems.extend(_field_problems(rule, total))
    problems.extend(_ambiguous_overlaps(rules))
    problems.extend(_floor_overcommit(rules, total))
    return tuple(problems)


def _field_problems(rule: PolicyRule, total: int) -> list[RuleProblem]:
    found = []
    if not rule.weekdays or not rule.weekdays <= set(WEEKDAYS):
        found.append(RuleProblem("weekdays", f"{rule.name}: weekdays must be ISO numbers 1 (Mon) to 7 (Sun)",
                                 (rule.name,)))
    if not (0 <= rule.start_minute < MINUTES_PER_DAY and 0 <= rule.end_minute < MINUTES_PER_DAY):
        found.append(RuleProblem("start_time", f"{rule.name}: times must lie within one day", (rule.name,)))
    if rule.ceiling_gpus is not None and rule.ceiling_gpus < rule.floor_gpus:
        found.append(RuleProblem(
            "ceiling_gpus", f"{rule.name}: ceiling {rule.ceiling_gpus} is below floor {rule.floor_gpus}", (rule.name,)
        ))
    if rule.floor_gpus > total:
        found.append(RuleProblem(
            "floor_gpus", f"{rule.name}: floor {rule.floor_gpus} GPUs is more than the fleet's {total}", (rule.name,)
        ))
    return found


def _ambiguous_overlaps(rules: Sequence[PolicyRule]) -> list[RuleProblem]:
    found: dict[tuple[str, str], RuleProblem] = {}
    for day, minute in _moments(rules):
        active = [r for r in rules if r.covers(day, minute)]
        for i, first in enumerate(active):
            for second in active[i + 1:]:
                same = first.orchestrator == second.orchestrator and first.precedence == second.precedence
                key = tuple(sorted((first.name, second.name)))
                if same and key not in found and (first.floor_gpus, first.ceiling_gpus, first.lendable) != (
                    second.floor_gpus, second.ceiling_gpus, second.lendable
                ):
                    found[(key[0], key[1])] = RuleProblem(
                        "precedence",
                        f"{key[0]} and {key[1]} overlap for {first.orchestrator} at {describe_moment(day, minute)} "
                        f"with the same precedence {first.precedence}: give one a higher precedence",
                        (key[0], key[1]),
                    )
    return list(found.values())


def _floor_overcommit(rules: Sequence[PolicyRule], total: int) -> list[RuleProblem]:
    seen: set[tuple[str, ...]] = set()
    found = []
    for day, minute in _moments(rules):
        bounds = bounds_at(rules, day, minute)
        floors = sum(b.floor_gpus for b in bounds.values())
        names = tuple(sorted(b.rule for b in bounds.values() if b.floor_gpus))
        if floors > total and names not in seen:
            seen.add(names)
            detail = ", ".join(f"{b.rule} ({b.orchestrator} {b.floor_gpus})" for b in bounds.values() if b.floor_gpus)
            found.append(RuleProblem(
                "floor_gpus",
                f"floors cannot all be met at {describe_moment(day, minute)}: {detail} sum to {floors} GPUs, "
                f"more than the {total} the fleet has",
                names,
            ))
    return found


def bounds_ahead(rules: Sequence[PolicyRule], weekday: int, minute: int, lead_minutes: int) -> dict[str, Bounds]:
    """Bounds now, with each floor raised to the highest floor coming into effect within ``lead_minutes``:
    a floor that starts at 08:00 must be met at 08:00, so its nodes start draining elsewhere before."""
    now = bounds_at(rules, weekday, minute)
    for step in sorted({(r.start_minute - minute) % MINUTES_PER_DAY for r in rules}):
        if not 0 < step <= lead_minutes:
            continue
        total = minute + step
        day = (weekday - 1 + total // MINUTES_PER_DAY) % 7 + 1
        for name, coming in bounds_at(rules, day, total % MINUTES_PER_DAY).items():
            current = now.get(name, Bounds(name))
            if coming.floor_gpus > current.floor_gpus:
                ceiling = current.ceiling_gpus
                if ceiling is not None:
                    ceiling = max(ceiling, coming.floor_gpus)
                now[name] = Bounds(name, coming.floor_gpus, ceiling, current.lendable and coming.lendable,
                                   f"{coming.rule} (from {describe_moment(day, total % MINUTES_PER_DAY)})")
    return now
