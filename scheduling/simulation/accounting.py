"""Time integrals and samples the replay report is made of.

Kept apart from the event loop so each figure has one definition: allocation and utilisation are
integrals of GPUs over the arrival window (first to last submission), divided by capacity x window.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field


@dataclass
class Integrals:
    """Piecewise-constant GPU counts integrated over ``[window_start, window_end]``."""

    window_start: float
    window_end: float
    last_time: float = 0.0
    allocated: float = 0.0  # GPUs held, including GPUs an exclusive allocation leaves idle
    used: float = 0.0  # GPUs the jobs asked for
    allocated_gpu_s: float = 0.0
    used_gpu_s: float = 0.0
    used_gpu_s_by_team: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    used_by_team: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    allocated_by_pool: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    used_by_pool: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    allocated_gpu_s_by_pool: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    used_gpu_s_by_pool: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    max_allocated: float = 0.0

    def advance(self, now: float) -> None:
        start = max(self.last_time, self.window_start)
        end = min(now, self.window_end)
        if end > start:
            span = end - start
            self.allocated_gpu_s += self.allocated * span
            self.used_gpu_s += self.used * span
            for team, gpus in self.used_by_team.items():
                if gpus:
                    self.used_gpu_s_by_team[team] += gpus * span
            for pool, gpus in self.allocated_by_pool.items():
                self.allocated_gpu_s_by_pool[pool] += gpus * span
                self.used_gpu_s_by_pool[pool] += self.used_by_pool[pool] * span
        self.last_time = now

    def start(self, team: str, allocated: float, used: float, *, pool: str = "") -> None:
        self.allocated += allocated
        self.used += used
        self.used_by_team[team] += used
        self.allocated_by_pool[pool] += allocated
        self.used_by_pool[pool] += used
        self.max_allocated = max(self.max_allocated, self.allocated)

    def stop(self, team: str, allocated: float, used: float, *, pool: str = "") -> None:
        self.allocated -= allocated
        self.used -= used
        self.used_by_team[team] -= used
        self.allocated_by_pool[pool] -= allocated
        self.used_by_pool[pool] -= used


@dataclass
class Samples:
    """Hourly (by default) observations: fragmentation, fairness, teams below their guarantee."""

    times_s: list[float] = field(default_factory=list)
    allocated_gpus: list[float] = field(default_factory=list)
    pending_gpus: list[float] = field(default_factory=list)
    fragmented_gpus: list[float] = field(default_factory=list)
    jain: list[float] = field(default_factory=list)
    below_guarantee: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    demanding: dict[str, int] = field(default_factory=lambda: defaultdict(int))

    def below_guarantee_share(self) -> dict[str, float]:
        """Per team: share of the samples in which it had demand and held less than min(demand, guarantee)."""
        samples = len(self.times_s) or 1
        return {team: round(self.below_guarantee.get(team, 0) / samples, 4) for team in sorted(self.demanding)}
