"""Nodes grouped by a key (free-GPU count, free-state signature), each group a min-heap of node indices.

Deletion is lazy: a node moved to another key leaves a stale heap entry behind, recognised because the
node's current key differs. Exact counts per key make emptiness checks O(1), and a heap is rebuilt when
stale entries outnumber live ones, so memory stays proportional to the fleet.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Hashable, Iterator
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)


class LazyBuckets(Generic[K]):
    __slots__ = ("_count", "_heaps", "_key_of")

    def __init__(self, size: int) -> None:
        self._heaps: dict[K, list[int]] = {}
        self._count: dict[K, int] = {}
        self._key_of: list[K | None] = [None] * size

    def copy(self) -> LazyBuckets[K]:
        clone: LazyBuckets[K] = LazyBuckets(0)
        clone._heaps = {key: list(heap) for key, heap in self._heaps.items()}
        clone._count = dict(self._count)
        clone._key_of = list(self._key_of)
        return clone

    def key_of(self, node: int) -> K | None:
        return self._key_of[node]

    def move(self, node: int, key: K | None) -> None:
        old = self._key_of[node]
        if old == key:
            return
        if old is not None:
            remaining = self._count[old] - 1
            if remaining:
                self._count[old] = remaining
            else:
                del self._count[old]
                del self._heaps[old]
        self._key_of[node] = key
        if key is None:
            return
        heap = self._heaps.get(key)
        if heap is None:
            self._heaps[key] = [node]
            self._count[key] = 1
            return
        self._count[key] += 1
        heapq.heappush(heap, node)
        if len(heap) > 2 * self._count[key] + 64:
            self._compact(key)

    def _compact(self, key: K) -> None:
        live = sorted({node for node in self._heaps[key] if self._key_of[node] == key})
        self._heaps[key] = live

    def count(self, key: K) -> int:
        return self._count.get(key, 0)

    def keys(self) -> Iterator[K]:
        """Keys that hold at least one node."""
        return iter(self._count)

    def first(self, key: K, accept: Callable[[int], bool] | None = None) -> int | None:
        """Lowest node index under ``key`` (that ``accept`` admits, when given)."""
        heap = self._heaps.get(key)
        if heap is None:
            return None
        key_of = self._key_of
        while heap and key_of[heap[0]] != key:
            heapq.heappop(heap)
        if not heap:
            return None
        if accept is None or accept(heap[0]):
            return heap[0]
        admitted = [node for node in heap if key_of[node] == key and accept(node)]
        return min(admitted) if admitted else None

    def members(self, key: K) -> list[int]:
        """Every node under ``key``, ascending (O(group size): for slow paths only)."""
        heap = self._heaps.get(key, [])
        return sorted({node for node in heap if self._key_of[node] == key})
