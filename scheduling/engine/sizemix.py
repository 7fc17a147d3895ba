"""Request-size mixes: the distribution of member sizes that FGD measures fragmentation against.

A mix maps *GPUs per member* (``0.5`` for half a shared GPU, ``1``, ``2``, ``8``...) to a relative
weight. Internally sizes are integer milli-GPUs so that fractional arithmetic stays exact.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from scheduling.engine.types import MILLI_PER_GPU, Request, SizeMix


def member_milli(request: Request) -> int:
    """Milli-GPUs one member of ``request`` occupies (a fractional share, or whole GPUs x 1000)."""
    if request.gpu_milli:
        return request.gpu_milli
    return request.gpus_per_member * MILLI_PER_GPU


def normalised_mix(size_mix: SizeMix | None) -> tuple[tuple[int, float], ...]:
    """(milli size, probability) pairs summing to 1; sizes of zero GPUs are dropped (they use no GPU)."""
    if not size_mix:
        return ()
    weights: dict[int, float] = {}
    for gpus, weight in size_mix.items():
        milli = round(gpus * MILLI_PER_GPU)
        if milli > 0 and weight > 0:
            weights[milli] = weights.get(milli, 0.0) + float(weight)
    total = sum(weights.values())
    if total <= 0:
        return ()
    return tuple((milli, weight / total) for milli, weight in sorted(weights.items()))


def size_mix_of(requests: Iterable[Request]) -> dict[float, float]:
    """The mix a batch of requests implies: every member counts once (FGD weighs tasks, not jobs)."""
    mix: dict[float, float] = {}
    for request in requests:
        gpus = member_milli(request) / MILLI_PER_GPU
        if gpus > 0:
            mix[gpus] = mix.get(gpus, 0.0) + request.members
    return mix


MIX_TOLERANCE = 0.01
"""How far (L1 distance) the observed mix may drift before the published mix moves. FGD's choices are
insensitive to drifts this small, and every move invalidates its cached deltas, so publishing every
observation would make each decision re-score every node signature."""


class SizeMixTracker:
    """Counts observed member sizes and publishes the normalised mix; ``version`` changes whenever the
    published mix changes, so callers can cache anything derived from it per version."""

    __slots__ = ("_counts", "_normalised", "_stale", "version")

    def __init__(self, size_mix: Mapping[float, float] | None = None) -> None:
        self._counts: dict[int, float] = {}
        self._normalised: tuple[tuple[int, float], ...] = ()
        self._stale = False  # the published mix lags the counts (a drift within MIX_TOLERANCE)
        self.version = 0
        # The starting mix is a prior in the same units as observations (members seen), so
        # {1: 100, 8: 10} outweighs the first few dozen observed requests.
        for gpus, weight in (size_mix or {}).items():
            milli = round(gpus * MILLI_PER_GPU)
            if milli > 0 and weight > 0:
                self._counts[milli] = self._counts.get(milli, 0.0) + float(weight)
        self._refresh()

    def observe(self, request: Request) -> None:
        milli = member_milli(request)
        if milli <= 0:
            return
        self._counts[milli] = self._counts.get(milli, 0.0) + request.members
        self._refresh()

    def _refresh(self) -> None:
        current = normalised_mix({m / MILLI_PER_GPU: w for m, w in self._counts.items()})
        if _distance(current, self._normalised) > MIX_TOLERANCE or not self._normalised:
            self._normalised = current
            self.version += 1
        self._stale = current != self._normalised

    def copy(self) -> SizeMixTracker:
        """An independent tracker that starts from these counts, publishing the mix they imply (as
        ``SizeMixTracker(self.counts())`` would; cheaply when the published mix is up to date).
        ``same_mix_as`` tells whether the copy publishes the very mix this tracker does."""
        if self._stale:
            return SizeMixTracker(self.counts())
        clone = object.__new__(SizeMixTracker)
        clone._counts = dict(self._counts)
        clone._normalised = self._normalised
        clone._stale = False
        clone.version = self.version
        return clone

    def same_mix_as(self, other: SizeMixTracker) -> bool:
        return self._normalised == other._normalised

    @property
    def normalised(self) -> tuple[tuple[int, float], ...]:
        return self._normalised

    def counts(self) -> dict[float, float]:
        """The raw weights (prior plus observations), to seed an independent tracker."""
        return {milli / MILLI_PER_GPU: weight for milli, weight in self._counts.items()}

    def as_mix(self) -> dict[float, float]:
        return {milli / MILLI_PER_GPU: weight for milli, weight in self._normalised}


def _distance(a: tuple[tuple[int, float], ...], b: tuple[tuple[int, float], ...]) -> float:
    """L1 distance between two normalised mixes (sizes missing from one count as weight 0)."""
    weights = dict(b)
    total = 0.0
    for size, weight in a:
        total += abs(weight - weights.pop(size, 0.0))
    return total + sum(weights.values())
