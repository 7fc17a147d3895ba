from __future__ import annotations

from scheduling.engine.sizemix import SizeMixTracker, normalised_mix, size_mix_of
from scheduling.engine.types import Request


def test_a_mix_is_normalised_in_milli_gpus_and_drops_empty_sizes() -> None:
    assert normalised_mix({0.5: 1, 2: 3, 0: 5}) == ((500, 0.25), (2000, 0.75))


def test_every_member_of_a_gang_counts_in_the_mix() -> None:
    assert size_mix_of([Request("g", members=3, gpus_per_member=8), Request("s", gpu_milli=250,
                                                                            gpus_per_member=0)]) == {8.0: 3, 0.25: 1}


def test_the_published_mix_ignores_drifts_below_the_tolerance_and_follows_larger_ones() -> None:
    tracker = SizeMixTracker({1: 1000})
    version = tracker.version
    tracker.observe(Request("tiny", gpus_per_member=8))  # 1 in 1001: a 0.2% drift
    assert tracker.version == version
    assert tracker.as_mix() == {1.0: 1.0}
    for i in range(20):
        tracker.observe(Request(f"more{i}", gpus_per_member=8))
    assert tracker.version > version
    true_share = 21 / 1021
    assert 0 < tracker.as_mix()[8.0] <= true_share
    assert true_share - tracker.as_mix()[8.0] <= 0.01  # never further behind than the tolerance
