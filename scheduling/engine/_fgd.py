"""FGD scoring: how much a node's expected fragmentation grows when it takes one member.

A node is summarised by its *signature*, the sorted tuple of per-GPU free shares: fragmentation
depends on nothing else, so nodes with equal signatures score equally. Per-size fragments of a
signature never change and are cached for good; expectations and deltas depend on the mix and are
cached until the mix's version changes.
"""

from __future__ import annotations

from scheduling.engine.fragmentation import member_fragment_milli
from scheduling.engine.sizemix import SizeMixTracker
from scheduling.engine.types import MILLI_PER_GPU

Signature = tuple[int, ...]


def take(sig: Signature, milli: int, value: int) -> Signature:
    """The signature after one member of ``milli`` takes GPU(s) whose free share is ``value``."""
    after = list(sig)
    if milli >= MILLI_PER_GPU:
        for _ in range(milli // MILLI_PER_GPU):
            after[after.index(MILLI_PER_GPU)] = 0
    else:
        after[after.index(value)] = value - milli
    return tuple(sorted(after))


class FgdScorer:
    __slots__ = ("_deltas", "_expected", "_fragments", "_version", "mix")

    def __init__(self, mix: SizeMixTracker, fragments: dict[tuple[Signature, int], int] | None = None) -> None:
        self.mix = mix
        self._fragments = fragments if fragments is not None else {}
        self._expected: dict[Signature, float] = {}
        self._deltas: dict[tuple[Signature, int], tuple[float, int]] = {}
        self._version = -1

    def copy(self) -> FgdScorer:
        """An independent scorer (own mix) sharing the mix-independent fragment cache, and the mix-dependent
        caches too while both publish the same mix (their entries are functions of signature and mix; the
        first scorer whose mix moves starts caches of its own in ``_sync``)."""
        clone = FgdScorer(self.mix.copy(), self._fragments)
        if self._version == self.mix.version and clone.mix.same_mix_as(self.mix):
            clone._expected, clone._deltas, clone._version = self._expected, self._deltas, clone.mix.version
        return clone

    def _sync(self) -> None:
        if self._version != self.mix.version:
            self._expected = {}
            self._deltas = {}
            self._version = self.mix.version

    def expected(self, sig: Signature) -> float:
        """Expected fragment of ``sig`` in milli-GPUs under the current mix."""
        cached = self._expected.get(sig)
        if cached is not None:
            return cached
        total = 0.0
        for size, probability in self.mix.normalised:
            fragment = self._fragments.get((sig, size))
            if fragment is None:
                fragment = self._fragments[(sig, size)] = member_fragment_milli(sig, size)
            total += probability * fragment
        self._expected[sig] = total
        return total

    def choice(self, sig: Signature, milli: int) -> tuple[float, int]:
        """(fragmentation growth in milli-GPUs, free share of the GPU to use) for one member on ``sig``.

        For whole GPUs the GPU choice is irrelevant (any wholly free GPUs give the same signature), so
        the second value is ``MILLI_PER_GPU``. For a share, each distinct free value is tried and the
        least growth wins, ties going to the fullest GPU (best fit inside the node).
        """
        self._sync()
        key = (sig, milli)
        cached = self._deltas.get(key)
        if cached is not None:
            return cached
        before = self.expected(sig)
        best = (float("inf"), -1)
        if milli >= MILLI_PER_GPU:
            best = (self.expected(take(sig, milli, MILLI_PER_GPU)) - before, MILLI_PER_GPU)
        else:
            for value in sorted(set(sig)):
                if value >= milli:
                    delta = self.expected(take(sig, milli, value)) - before
                    if delta < best[0]:
                        best = (delta, value)
        self._deltas[key] = best
        return best

    def growth(self, sig: Signature, milli: int, members: int) -> float:
        """Growth when ``members`` members land on one node one after another, each choosing best."""
        total = 0.0
        for _ in range(members):
            delta, value = self.choice(sig, milli)
            total += delta
            sig = take(sig, milli, value)
        return total
