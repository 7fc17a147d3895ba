"""Golden comparison at test time: a replay gives byte-identical figures whether each EASY pass is the
simulator's optimised one (pool-side filters, the engine's remembered attempts, ending queue, copied
caches) or the plain reference (every one of the first ``max_tests`` queued jobs handed to a
from-scratch EASY backfill with the running list). Nothing is hard-coded: both runs happen here."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from scheduling.engine.types import RunningWorkload
from scheduling.simulation import simulate_replay
from scheduling.simulation.pools import Pool
from scheduling.simulation.replay import JobRun
from scheduling.traces import read_philly
from scheduling.traces.records import Trace
from tests.engine.reference_backfill import reference_easy_backfill

DEMO_SLICE = Path(__file__).resolve().parents[2] / "scheduling" / "demo_data" / "philly_slice.csv"
JOBS = 1_200


def _reference_easy(pool: Pool, now: float, seed: int) -> list[JobRun]:
    queue = [run for run in pool.pending[: pool.spec.max_tests] if run.alloc is not None]
    running = [
        RunningWorkload(run.alloc.id, run.team, run.alloc.gpus, run.placement.assignments,
                        expected_end=(run.start or now) + run.job.request.duration_estimate_s
                        if run.job.request.duration_estimate_s > 0 else None)
        for index, run in pool.running.items()
        if index not in pool.cpu_running and run.alloc is not None and run.placement is not None
    ]
    by_id = {run.alloc.id: run for run in queue if run.alloc is not None}
    placements = reference_easy_backfill(
        pool.state, [run.alloc for run in queue if run.alloc is not None], running, now,
        policy=pool.spec.placement_policy, seed=seed)
    for placement in placements:
        pool.start(by_id[placement.request_id], placement, now)
    return [by_id[placement.request_id] for placement in placements]


@pytest.fixture(scope="module")
def sample() -> Trace:
    trace = read_philly(DEMO_SLICE)
    return replace(trace, jobs=trace.jobs[:JOBS])


def _figures(trace: Trace, policy: str, capacity: int) -> str:
    figures = simulate_replay(trace, policy, seed=5, capacity_gpus=capacity).figures
    return json.dumps({key: value for key, value in figures.items() if key != "wall_time_s"}, sort_keys=True)


@pytest.mark.parametrize(("policy", "capacity"), [("federated", 96), ("siloed", 128), ("best-fit", 80)])
def test_a_replay_is_identical_with_the_plain_reference_backfill(
    sample: Trace, policy: str, capacity: int, monkeypatch: pytest.MonkeyPatch,
) -> None:
    optimised = _figures(sample, policy, capacity)
    with monkeypatch.context() as patch:
        patch.setattr(Pool, "_easy", _reference_easy)
        reference = _figures(sample, policy, capacity)
    assert optimised == reference
    waits = json.loads(optimised)["wait_hours"]["all"]
    assert waits["p95"] > 0  # queues formed, so backfill had heads to protect and jobs to pass
