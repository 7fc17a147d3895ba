"""Small, dependency-free statistics helpers shared by the packing and replay reports."""

from __future__ import annotations

import math
from collections.abc import Sequence

SIZE_BUCKETS = (("1", 0.0, 1.0), ("2-4", 1.0, 4.0), ("5-8", 4.0, 8.0), (">8", 8.0, math.inf))
"""Job-size buckets (total GPUs, lower exclusive, upper inclusive) used by Philly analyses."""


def size_bucket(gpus: float) -> str:
    for name, low, high in SIZE_BUCKETS:
        if low < gpus <= high:
            return name
    return "1"  # fractional and CPU-only jobs are reported with the smallest jobs


def percentile(values: Sequence[float], q: float) -> float | None:
    """Linear-interpolation percentile (numpy's default), ``None`` for no values."""
    if not values:
        return None
    ordered = sorted(values)
    position = (len(ordered) - 1) * q / 100
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def percentile_counting_misses(values: Sequence[float], misses: int, q: float) -> float | None:
    """``percentile`` over ``values`` plus ``misses`` infinite values (jobs that never started).

    ``math.inf`` when the percentile reaches the misses (interpolating towards an infinite wait is
    infinite); ``None`` for no jobs at all.
    """
    count = len(values) + misses
    if count == 0:
        return None
    position = (count - 1) * q / 100
    low = math.floor(position)
    high = min(low + 1, count - 1)
    if low >= len(values) or (high >= len(values) and position > low):
        return math.inf
    ordered = sorted(values)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def summary(values: Sequence[float]) -> dict[str, float | int | None]:
    """Count, mean, p50/p95/p99 and max of ``values`` (in the values' unit)."""
    return {
        "count": len(values),
        "mean": sum(values) / len(values) if values else None,
        "p50": percentile(values, 50),
        "p95": percentile(values, 95),
        "p99": percentile(values, 99),
        "max": max(values) if values else None,
    }


def median(values: Sequence[float]) -> float | None:
    return percentile(values, 50)
