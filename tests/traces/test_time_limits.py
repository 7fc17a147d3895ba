"""Generic CSV ``time_limit``: backfill reserves by the limit, as Slurm does; bad limits name the cell."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from scheduling.simulation.runner import simulate_replay
from scheduling.traces.errors import TraceFormatError
from scheduling.traces.generic import read_generic_csv, write_generic_csv

HEADER = "id,submit_time,duration,gang_size,gpus_per_member,gpu_model,team,kind,time_limit\n"
# A holds 4 of 8 GPUs; B (8 GPUs) must wait for it; C (4 GPUs, 500 s) can backfill only if it ends before
# B's reservation, which is A's end as the scheduler knows it: its limit, or its true duration.
ROWS = "A,0,100,1,4,,t,training,{a_limit}\nB,1,100,1,8,,t,training,\nC,2,500,1,4,,t,training,\n"


def trace_file(tmp_path: Path, a_limit: str) -> Path:
    path = tmp_path / "jobs.csv"
    path.write_text(HEADER + ROWS.format(a_limit=a_limit), encoding="utf-8")
    return path


def c_wait_s(path: Path) -> float:
    figures = simulate_replay(read_generic_csv(path), "best-fit", capacity_gpus=8).as_dict()
    four_gpu_jobs = figures["teams"]["t"]["wait_hours"]["2-4"]  # A (started at once) and C
    assert four_gpu_jobs["count"] == 2
    return four_gpu_jobs["mean"] * 2 * 3600


def test_backfill_reserves_by_the_time_limit(tmp_path: Path) -> None:
    by_duration = c_wait_s(trace_file(tmp_path, ""))
    by_limit = c_wait_s(trace_file(tmp_path, "10000"))

    assert by_limit == pytest.approx(0.0)  # C ends (502 s) before A's limit frees B's nodes: backfilled
    assert by_duration == pytest.approx(200.0 - 2.0)  # C would delay B (due at 100 s): it waits for B's end


def test_the_limit_is_what_the_scheduler_knows(tmp_path: Path) -> None:
    jobs = {job.id: job for job in read_generic_csv(trace_file(tmp_path, "3600")).jobs}

    assert (jobs["A"].duration_s, jobs["A"].request.duration_estimate_s) == (100.0, 3600.0)
    assert jobs["B"].request.duration_estimate_s == 100.0  # empty: the duration


def test_time_limits_survive_a_round_trip(tmp_path: Path) -> None:
    original = read_generic_csv(trace_file(tmp_path, "3600")).jobs
    write_generic_csv(tmp_path / "out.csv", original)

    again = {job.id: job for job in read_generic_csv(tmp_path / "out.csv").jobs}
    assert again["A"].request.duration_estimate_s == 3600.0 and again["B"].request.duration_estimate_s == 100.0


@pytest.mark.parametrize(("limit", "message"), [("50", "shorter than the duration"), ("0", "> 0"), ("1h", "number")])
def test_a_bad_time_limit_names_file_line_and_column(tmp_path: Path, limit: str, message: str) -> None:
    path = trace_file(tmp_path, limit)

    with pytest.raises(TraceFormatError, match=re.escape(f"{path}:2:9: column 'time_limit'") + ".*" + message):
        read_generic_csv(path)


def test_skip_mode_counts_bad_rows_by_column(tmp_path: Path) -> None:
    path = tmp_path / "jobs.csv"
    path.write_text(HEADER + "A,0,100,1,4,,t,training,50\nB,x,100,1,8,,t,training,\nC,2,5,1,4,,t,training,\n")

    trace = read_generic_csv(path, on_error="skip")

    report = trace.reports[0]
    assert [job.id for job in trace.jobs] == ["C"]
    assert report.skipped == {"malformed": 2}
    assert report.malformed_by_column == {"submit_time": 1, "time_limit": 1}
