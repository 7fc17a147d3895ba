"""Generic CSV ``gpus_per_member 0`` is a CPU-only job, as documented: replayed, never rejected for it."""

from __future__ import annotations

from pathlib import Path

import pytest

from scheduling.simulation.runner import simulate_replay
from scheduling.traces import load_trace

HEADER = "id,submit_time,duration,gang_size,gpus_per_member,gpu_model,team,kind,cpu_milli\n"


def run(tmp_path: Path, rows: str, fleet: str) -> dict:
    trace = tmp_path / "jobs.csv"
    trace.write_text(HEADER + rows, encoding="utf-8")
    nodes = tmp_path / "fleet.csv"
    nodes.write_text("name,gpus,gpu_model,cpu_milli\n" + fleet, encoding="utf-8")
    return simulate_replay(load_trace(str(trace), fleet=nodes), "best-fit").as_dict()


def test_cpu_only_jobs_run_beside_gpu_jobs_and_wait_only_for_cpu(tmp_path: Path) -> None:
    figures = run(
        tmp_path,
        "gpu,0,100,1,8,,t,training,1000\ncpu1,1,100,1,0,,t,batch,3000\ncpu2,2,100,1,0,,t,batch,3000\n",
        "n1,8,H100,4000\n",
    )

    assert figures["jobs"]["completed"] == 3 and figures["jobs"]["rejected"] == 0
    waits = figures["wait_hours"]["1"]  # size bucket of CPU-only jobs: cpu1 and cpu2
    # cpu1 fits beside the GPU job (1000 + 3000 of 4000 milli-CPU); cpu2 needs cpu1's 3000 back (t = 101)
    assert waits["count"] == 2
    assert waits["mean"] * 3600 * 2 == pytest.approx(0 + (101 - 2))


def test_a_cpu_only_job_too_big_for_every_node_is_rejected_with_a_reason(tmp_path: Path) -> None:
    figures = run(tmp_path, "cpu,0,100,1,0,,t,batch,9000\n", "n1,8,H100,4000\n")

    assert figures["jobs"]["rejected"] == 1
    assert list(figures["jobs"]["rejection_reasons"]) == [
        "no node of pool shared has the CPU and memory this CPU-only job asks for"
    ]
