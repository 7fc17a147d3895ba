"""The replay report: plain data (JSON-ready) computed from a finished run."""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass
from typing import TYPE_CHECKING

from scheduling.simulation.stats import SIZE_BUCKETS, percentile_counting_misses, size_bucket, summary

if TYPE_CHECKING:
    from scheduling.simulation.replay import JobRun, Replay

HOUR = 3600.0


@dataclass(frozen=True)
class ReplayResult:
    figures: dict[str, object]

    def __getitem__(self, key: str) -> object:
        return self.figures[key]

    def as_dict(self) -> dict[str, object]:
        return dict(self.figures)


def build_result(replay: Replay, *, wall_time_s: float) -> ReplayResult:
    runs = replay.runs
    completed = [run for run in runs if run.end is not None]
    started = [run for run in runs if run.first_start is not None]
    running = [run for run in runs if run.end is None and run.placement is not None]
    rejected = [run for run in runs if run.rejected]
    queued = [run for run in runs if not run.rejected and run.first_start is None]
    window = max(replay.acct.window_end - replay.acct.window_start, 1e-9)
    capacity_gpu_s = replay.capacity_gpus * window
    federation = replay.federation
    figures: dict[str, object] = {
        "mode": "replay",
        "policy": replay.policy,
        "seed": replay.seed,
        "capacity_gpus": replay.capacity_gpus,
        "pools": {
            name: {
                "gpus": pool.capacity_gpus,
                "discipline": pool.spec.discipline,
                "placement_policy": pool.spec.placement_policy,
                "exclusive": pool.spec.exclusive,
                "queue": pool.spec.queue,
                "backfill_depth": pool.spec.max_tests,
                "reservation": pool.spec.reservation,
                "preemption": pool.spec.preemption,
                **_group_figures(
                    [run for run in runs if run.pool == name],
                    pool.capacity_gpus * window,
                    replay.acct.allocated_gpu_s_by_pool.get(name, 0.0),
                    replay.acct.used_gpu_s_by_pool.get(name, 0.0),
                ),
            }
            for name, pool in replay.pools.items()
        },
        "teams": _team_figures(replay, capacity_gpu_s),
        "window_hours": window / HOUR,
        "jobs": {
            "arrived": len(runs),
            "completed": len(completed),
            "running_at_end": len(running),
            "queued_at_end": len(queued),
            "rejected": len(rejected),
            "rejection_reasons": _count(run.rejected for run in rejected),
        },
        "allocation": replay.acct.allocated_gpu_s / capacity_gpu_s,
        "utilisation": replay.acct.used_gpu_s / capacity_gpu_s,
        "max_allocated_gpus": replay.acct.max_allocated,
        "wait_hours": _waits(started),
        "jct_hours": _by_size([(run.gpus, (run.end - run.job.submit_s) / HOUR) for run in completed if run.end]),
        "fragmentation": {
            "times_h": [t / HOUR for t in replay.samples.times_s],
            "fragmented_gpus": replay.samples.fragmented_gpus,
            "allocated_gpus": replay.samples.allocated_gpus,
            "pending_gpus": replay.samples.pending_gpus,
            "mean_fragmented_gpus": _mean(replay.samples.fragmented_gpus),
        },
        "jain_fairness": _mean(replay.samples.jain),
        "below_guarantee_share": replay.samples.below_guarantee_share(),
        "utilisation_by_team": {
            team: used / capacity_gpu_s for team, used in sorted(replay.acct.used_gpu_s_by_team.items())
        },
        "preemptions": federation.preemptions if federation else 0,
        "preempted_gpu_hours_lost": (federation.lost_gpu_s / HOUR) if federation else 0.0,
        "node_moves": federation.node_moves if federation else 0,
        "shared_node_starts": federation.shared_node_starts if federation else 0,
        "scenario": replay.scenario.as_dict(),
        "wall_time_s": wall_time_s,
    }
    if replay.stopped_early_s is not None:  # figures of a partial run: only its verdict counts
        figures["stopped_early_s"] = replay.stopped_early_s
    return ReplayResult(figures)


def _group_figures(
    runs: list[JobRun], capacity_gpu_s: float, allocated_gpu_s: float, used_gpu_s: float
) -> dict[str, object]:
    """The fleet-wide headline figures for one pool (or any group of jobs with its own capacity)."""
    started = [run for run in runs if run.first_start is not None]
    return {
        "jobs": len(runs),
        "rejected": sum(1 for run in runs if run.rejected),
        "allocation": allocated_gpu_s / capacity_gpu_s if capacity_gpu_s else None,
        "utilisation": used_gpu_s / capacity_gpu_s if capacity_gpu_s else None,
        "wait_hours": _waits(started),
    }


def _team_figures(replay: Replay, capacity_gpu_s: float) -> dict[str, dict[str, object]]:
    """Per team: jobs, share of the GPU-hours used, utilisation of the whole fleet, waits by size."""
    by_team: dict[str, list[JobRun]] = defaultdict(list)
    for run in replay.runs:
        by_team[run.team].append(run)
    used = replay.acct.used_gpu_s_by_team
    total_used = sum(used.values()) or 1.0
    teams: dict[str, dict[str, object]] = {}
    for team in sorted(by_team):
        runs = by_team[team]
        started = [run for run in runs if run.first_start is not None]
        teams[team] = {
            "jobs": len(runs),
            "rejected": sum(1 for run in runs if run.rejected),
            "gpu_hours": used.get(team, 0.0) / HOUR,
            "share_of_gpu_hours": used.get(team, 0.0) / total_used,
            "utilisation": used.get(team, 0.0) / capacity_gpu_s,
            "wait_hours": _waits(started),
            "wait_p95_hours_counting_unstarted": _p95_counting_unstarted(started, len(runs) - len(started)),
        }
    return teams


def _p95_counting_unstarted(started: list[JobRun], unstarted: int) -> float | None:
    """p95 wait where a job rejected or still queued at the end waits forever; JSON null = infinite."""
    p95 = percentile_counting_misses([_wait_h(run) for run in started], unstarted, 95)
    return None if p95 is None or math.isinf(p95) else p95


def _waits(started: list[JobRun]) -> dict[str, dict[str, float | int | None]]:
    """Hours from submission to first start, by job size."""
    return _by_size([(run.gpus, _wait_h(run)) for run in started])


def _wait_h(run: JobRun) -> float:
    first = run.first_start if run.first_start is not None else run.job.submit_s
    return (first - run.job.submit_s) / HOUR


def _by_size(pairs: list[tuple[float, float]]) -> dict[str, dict[str, float | int | None]]:
    buckets: dict[str, list[float]] = defaultdict(list)
    for gpus, value in pairs:
        buckets[size_bucket(gpus)].append(value)
    table = {"all": summary([value for _, value in pairs])}
    for name, _, _ in SIZE_BUCKETS:
        table[name] = summary(buckets.get(name, []))
    return table


def _count(reasons: object) -> dict[str, int]:
    counts: dict[str, int] = defaultdict(int)
    for reason in reasons:  # type: ignore[attr-defined]
        counts[str(reason)] += 1
    return dict(counts)


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None
