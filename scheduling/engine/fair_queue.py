"""Pending work in fair-share order, kept incrementally: each team's jobs stay sorted as they come and go.

``fairshare.order_pending`` sorts the whole queue on (team's usage per share, -priority, submission, id).
Only the first key moves between passes (usage changes with every start and stop, shares with every
entitlement refresh); the rest is fixed per job. So a caller that orders its queue before every
scheduling pass (the replay: tens of thousands of passes) keeps each team's jobs sorted on the fixed keys
as they are queued and started, and per pass only sorts the teams by ratio and concatenates their runs.
The result is ``order_pending``'s order exactly (a property test compares both after random events):
teams of equal ratio are merged on the fixed keys, as the full sort would interleave them.
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping
from itertools import groupby
from operator import itemgetter
from typing import Generic, TypeVar

from scheduling.engine.fairshare import team_ratios
from scheduling.engine.types import Entitlement, Request

T = TypeVar("T")
_Key = tuple[int, float, str]  # (-priority, submitted_at, id): the fixed part of the fair-share order


def _fixed_key(request: Request) -> _Key:
    return (-request.priority, request.submitted_at, request.id)


class _TeamRun(Generic[T]):
    """One team's queued jobs, sorted by their fixed key (two parallel lists: bisect on keys, copy items)."""

    __slots__ = ("items", "keys")

    def __init__(self) -> None:
        self.keys: list[_Key] = []
        self.items: list[T] = []


class FairShareQueue(Generic[T]):
    """Queued requests (each with the caller's item, e.g. its job record) by team, in fair-share order on demand.

    Ids must be unique among queued requests; ``remove`` takes the same request that was added.
    """

    __slots__ = ("_size", "_teams")

    def __init__(self) -> None:
        self._teams: dict[str, _TeamRun[T]] = {}
        self._size = 0

    def __len__(self) -> int:
        return self._size

    def add(self, request: Request, item: T) -> None:
        run = self._teams.get(request.team)
        if run is None:
            run = self._teams[request.team] = _TeamRun()
        key = _fixed_key(request)
        position = bisect.bisect_left(run.keys, key)
        if position < len(run.keys) and run.keys[position] == key:
            raise ValueError(f"{request.id} is already queued")
        run.keys.insert(position, key)
        run.items.insert(position, item)
        self._size += 1

    def remove(self, request: Request) -> None:
        """Forget a queued request (KeyError if it is not queued)."""
        run = self._teams.get(request.team)
        key = _fixed_key(request)
        position = bisect.bisect_left(run.keys, key) if run is not None else 0
        if run is None or position == len(run.keys) or run.keys[position] != key:
            raise KeyError(request.id)
        del run.keys[position]
        del run.items[position]
        if not run.keys:
            del self._teams[request.team]
        self._size -= 1

    def ordered(
        self,
        usage_by_team: Mapping[str, float],
        entitlement_by_team: Mapping[str, Entitlement] | Mapping[str, float],
    ) -> list[T]:
        """The items in ``order_pending``'s order for this usage and these entitlements."""
        ratio = team_ratios(self._teams, usage_by_team, entitlement_by_team)
        ordered: list[T] = []
        for _ratio, tied in groupby(sorted(self._teams, key=ratio.__getitem__), key=ratio.__getitem__):
            runs = [self._teams[team] for team in tied]
            if len(runs) == 1:
                ordered.extend(runs[0].items)
                continue
            # Teams of equal ratio interleave on the fixed keys (unique: they end in the id).
            merged = sorted((pair for run in runs for pair in zip(run.keys, run.items, strict=True)),
                            key=itemgetter(0))
            ordered.extend(item for _key, item in merged)
        return ordered
