"""Promised GPUs over time: can real GPUs serve every quota promise at once, and how many more fit?

A ``Promise`` reserves ``gpus`` GPUs over ``[starts_at, ends_at)`` (``None``: unbounded, as standing queue
guarantees are). A model-specific promise can be served only by GPUs of its ``gpu_model``; an any-model
promise (``gpu_model == ""``) by any GPU. Whether one instant's promises can all be served is a bipartite
supply/demand problem (GPU models supply, promises demand). By Hall's theorem an assignment exists exactly
when, for every set S of models, the promises that only S can serve fit in S's GPUs. Only a model-specific
promise of a model in S is confined to S, and an any-model promise is confined only to the whole fleet, so
every condition follows from k + 1 of them: each model on its own, and the whole fleet. Checking those is
exact, in O(k) per interval, for any number of models.

The set of active promises changes only where a promise starts or ends, so checking every interval between
consecutive boundaries inside a window checks every instant of it.

A candidate promise fits when real GPUs can serve it *on top of* everything already servable: the maximum
flow must grow by all of its GPUs in every interval. On a fleet whose promises are all servable that is the
same as "everything stays servable"; on one already short (nodes went down), promises the shortage does
not touch can still be made, and none that would take GPUs from an existing promise.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime

ANY_MODEL = ""


@dataclass(frozen=True, slots=True)
class Promise:
    """GPUs reserved for someone: a standing guarantee (no bounds) or a time-bounded quota grant."""

    gpus: int
    gpu_model: str = ANY_MODEL
    starts_at: datetime | None = None
    ends_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class Load:
    """The promises active over one interval in which none starts or ends (``ends_at`` None: for ever)."""

    starts_at: datetime
    ends_at: datetime | None
    by_model: Mapping[str, int]
    any_model: int


@dataclass(frozen=True, slots=True)
class Shortfall:
    """Over one interval, the promises confined to some GPU models would outgrow those models' GPUs."""

    starts_at: datetime
    ends_at: datetime | None
    models: tuple[str, ...]
    whole_fleet: bool
    promised: int
    supply: int
    supply_by_model: tuple[tuple[str, int], ...] = ()
    capped: tuple[str, ...] = ()  # models whose promises exceed their GPUs: counted on the fleet at their size

    @property
    def short(self) -> int:
        return self.promised - self.supply

    def sentence(self) -> str:
        """E.g. "from 2026-12-10 00:00 to 2026-12-17 00:00, H100 promises would be 384 on 192 H100 GPUs, 192 short"."""
        when = f"from {_stamp(self.starts_at)} " + (f"to {_stamp(self.ends_at)}" if self.ends_at else "onwards")
        if not self.whole_fleet:
            model = self.models[0]
            return (
                f"{when}, {model} promises would be {self.promised} on {self.supply} {model} GPUs, {self.short} short"
            )
        parts = " + ".join(f"{gpus} {model}" for model, gpus in self.supply_by_model) or "no GPUs up"
        capped = f", {' and '.join(self.capped)} promises counted up to their model's GPUs" if self.capped else ""
        return (
            f"{when}, all promises (any-model and per-model{capped}) would be {self.promised} on the fleet's "
            f"{self.supply} GPUs ({parts}), {self.short} short"
        )


@dataclass(frozen=True, slots=True)
class PromiseCheck:
    """Whether a candidate promise fits, the most that fits over its whole period, and where it breaks."""

    fits: bool
    room: int
    tightest: Load | None
    shortfalls: tuple[Shortfall, ...]

    def worst(self) -> Shortfall | None:
        """The shortfall to cut first: the largest, the earliest of equals."""
        return max(self.shortfalls, key=lambda s: s.short, default=None)


def _stamp(moment: datetime) -> str:
    return f"{moment:%Y-%m-%d %H:%M}"


def _boundaries(promise: Promise, starts_at: datetime, ends_at: datetime | None) -> tuple[datetime, datetime | None]:
    """The promise's period clipped to the window (it is assumed to overlap it)."""
    start = starts_at if promise.starts_at is None else max(promise.starts_at, starts_at)
    if promise.ends_at is None:
        return start, ends_at
    return start, promise.ends_at if ends_at is None else min(promise.ends_at, ends_at)


def _overlaps(promise: Promise, starts_at: datetime, ends_at: datetime | None) -> bool:
    starts_before_end = ends_at is None or promise.starts_at is None or promise.starts_at < ends_at
    ends_after_start = promise.ends_at is None or promise.ends_at > starts_at
    return starts_before_end and ends_after_start and promise.gpus > 0


def loads(promises: Iterable[Promise], starts_at: datetime, ends_at: datetime | None = None) -> Iterator[Load]:
    """Every interval of ``[starts_at, ends_at)`` over which the set of active promises is constant, in order."""
    events: dict[datetime, dict[str, int]] = {}
    active: dict[str, int] = {}
    for promise in promises:
        if not _overlaps(promise, starts_at, ends_at):
            continue
        start, end = _boundaries(promise, starts_at, ends_at)
        at_start = events.setdefault(start, {})
        at_start[promise.gpu_model] = at_start.get(promise.gpu_model, 0) + promise.gpus
        if end is not None and (ends_at is None or end < ends_at):
            at_end = events.setdefault(end, {})
            at_end[promise.gpu_model] = at_end.get(promise.gpu_model, 0) - promise.gpus
    events.setdefault(starts_at, {})
    moments = sorted(events)
    for index, moment in enumerate(moments):
        for model, delta in events[moment].items():
            active[model] = active.get(model, 0) + delta
        until = moments[index + 1] if index + 1 < len(moments) else ends_at
        by_model = {model: gpus for model, gpus in active.items() if model != ANY_MODEL and gpus}
        yield Load(moment, until, by_model, active.get(ANY_MODEL, 0))


def spare(supply: Mapping[str, int], load: Load) -> int:
    """GPUs no promise needs once every promise that can be served is: what any new promise may take."""
    leftover = sum(max(gpus - load.by_model.get(model, 0), 0) for model, gpus in supply.items())
    return max(leftover - load.any_model, 0)


def room(supply: Mapping[str, int], load: Load, gpu_model: str) -> int:
    """The most GPUs a new promise of ``gpu_model`` ('' = any) can take over ``load``'s interval without
    taking any from an existing promise: its own model's leftover, and no more than the fleet's spare."""
    fleet_spare = spare(supply, load)
    if gpu_model == ANY_MODEL:
        return fleet_spare
    return min(max(supply.get(gpu_model, 0) - load.by_model.get(gpu_model, 0), 0), fleet_spare)


def shortfalls(supply: Mapping[str, int], load: Load) -> tuple[Shortfall, ...]:
    """The Hall conditions ``load`` breaks: each model on its own, then the whole fleet (empty: servable).

    On the fleet, a model's promises count only up to that model's GPUs: what they ask beyond them no other
    GPU can serve, and is that model's own shortfall. So the shorts add up to exactly the promised GPUs that
    no assignment can serve, and a shortage of one model is never counted twice."""
    found = [
        Shortfall(load.starts_at, load.ends_at, (model,), False, gpus, supply.get(model, 0))
        for model, gpus in sorted(load.by_model.items())
        if gpus > supply.get(model, 0)
    ]
    promised = load.any_model + sum(min(gpus, supply.get(model, 0)) for model, gpus in load.by_model.items())
    total = sum(supply.values())
    if promised > total:
        models = tuple(sorted(model for model, gpus in supply.items() if gpus))
        by_model = tuple((model, supply[model]) for model in models)
        capped = tuple(s.models[0] for s in found)
        found.append(Shortfall(load.starts_at, load.ends_at, models, True, promised, total, by_model, capped))
    return tuple(found)


def _with(load: Load, candidate: Promise) -> Load:
    if candidate.gpu_model == ANY_MODEL:
        return Load(load.starts_at, load.ends_at, load.by_model, load.any_model + candidate.gpus)
    by_model = dict(load.by_model)
    by_model[candidate.gpu_model] = by_model.get(candidate.gpu_model, 0) + candidate.gpus
    return Load(load.starts_at, load.ends_at, by_model, load.any_model)


def _blamed(supply: Mapping[str, int], load: Load, candidate: Promise) -> list[Shortfall]:
    """The conditions the candidate takes part in that break once it is added: its own model's and the fleet's
    (a shortage of another model alone is not the candidate's doing). Never empty when the candidate exceeds
    its room: more than its model's leftover breaks its model, more than the fleet's spare breaks the fleet."""
    return [
        shortfall
        for shortfall in shortfalls(supply, _with(load, candidate))
        if shortfall.whole_fleet or shortfall.models == (candidate.gpu_model,)
    ]


def check_promise(supply: Mapping[str, int], promises: Iterable[Promise], candidate: Promise) -> PromiseCheck:
    """Can ``candidate`` join ``promises`` on a fleet of ``supply`` GPUs per model? Checked over the candidate's
    own period (a standing one from its start on); its room is the least, over that period's intervals, that a
    new promise of its model could take."""
    if candidate.starts_at is None:
        raise ValueError("a candidate promise needs a start: the window is checked from there on")
    least: int | None = None
    tightest: Load | None = None
    found: list[Shortfall] = []
    for load in loads(promises, candidate.starts_at, candidate.ends_at):
        here = room(supply, load, candidate.gpu_model)
        if least is None or here < least:
            least, tightest = here, load
        if candidate.gpus > here:
            found += _blamed(supply, load, candidate)
    least = least or 0  # loads() yields at least one interval; this only narrows the type
    return PromiseCheck(candidate.gpus <= least, least, tightest, tuple(found))


def earliest_fit(
    supply: Mapping[str, int], promises: Iterable[Promise], candidate: Promise, latest_start: datetime
) -> datetime | None:
    """The earliest start, from the candidate's own on and no later than ``latest_start``, at which the candidate
    kept as long fits (``check_promise``); None when none does.

    Exact with few checks: a window's room is the least over the intervals it covers, and moving its start later
    only lets it fit by dropping an interval from its front, which happens when the start passes a promise's start
    or end (moving its end later only adds intervals). So the earliest fitting start is the candidate's own or one
    of those moments, and only they are checked, in order."""
    if candidate.starts_at is None or candidate.ends_at is None:
        raise ValueError("the candidate needs a start and an end: its length is kept")
    first, length = candidate.starts_at, candidate.ends_at - candidate.starts_at
    held = list(promises)
    moments = sorted({m for p in held for m in (p.starts_at, p.ends_at) if m is not None and first < m <= latest_start})
    for start in [first, *moments]:
        if start > latest_start:
            break
        if check_promise(supply, held, replace(candidate, starts_at=start, ends_at=start + length)).fits:
            return start
    return None


def worsened(
    supply: Mapping[str, int], before: Sequence[Promise], after: Sequence[Promise], starts_at: datetime
) -> list[Shortfall]:
    """The shortfalls from ``starts_at`` on that changing ``before`` into ``after`` creates or deepens, Hall
    set by Hall set: an edit of standing guarantees may not leave more promised GPUs unservable, but a
    shortage it does not touch (nodes went down) does not block it."""
    earlier = list(loads(before, starts_at))
    moments = [load.starts_at for load in earlier]
    found: list[Shortfall] = []
    for load in loads(after, starts_at):
        then = earlier[bisect_right(moments, load.starts_at) - 1]
        was = {(s.models, s.whole_fleet): s.short for s in shortfalls(supply, then)}
        found += [s for s in shortfalls(supply, load) if s.short > was.get((s.models, s.whole_fleet), 0)]
    return found
