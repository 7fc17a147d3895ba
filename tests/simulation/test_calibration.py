"""The calibration harness's parts (benchmarks/calibrate_slurm.py), without Slurm: the compressed
window, the partitions as slurm.conf lines and as a --pools file, sacct --json parsing (Slurm 22 and 23+
number forms) and the error table."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from scheduling.simulation import calibration as cal
from scheduling.simulation.pool_file import plan_pools
from scheduling.traces.generic import read_generic_csv
from scheduling.traces.nodes import read_fleet_csv
from tests.simulation.test_simulator import job

TRACE = [
    job("a", "big", 0, 3600, 8),
    job("b", "big", 1800, 60, 1),
    job("c", "small", 3600, 36_000, 2, members=2),
    job("d", "tiny", 7200, 10, 1),
    job("e", "big", 9000, 600, 4),
]


def test_compress_divides_times_caps_durations_and_rounds_limits_up_to_minutes() -> None:
    jobs = cal.compress(TRACE, start_s=1800, count=3, factor=60, max_duration_s=120)
    assert [j.name for j in jobs] == ["c0000", "c0001", "c0002"]
    assert [j.submit_s for j in jobs] == [0.0, 30.0, 90.0]
    # 60 s / 60 = 1 s; 36,000 s / 60 = 600 s capped at 120; 10 s / 60 floored at 1 s
    assert [j.duration_s for j in jobs] == [1.0, 120.0, 1.0]
    # limit = run time + 5 s margin, rounded up to whole minutes (Slurm's unit)
    assert [j.limit_min for j in jobs] == [1, 3, 1]
    assert (jobs[1].members, jobs[1].gpus_per_member, jobs[1].gpus) == (2, 2, 4)


def test_compress_names_the_field_when_the_window_is_too_short() -> None:
    with pytest.raises(ValueError, match="count: only 2 jobs"):
        cal.compress(TRACE, start_s=7200, count=3, factor=60, max_duration_s=120)
    with pytest.raises(ValueError, match="factor: must be > 0"):
        cal.compress(TRACE, start_s=0, count=1, factor=0, max_duration_s=120)


def test_partitions_give_the_largest_teams_their_own_nodes_in_proportion() -> None:
    jobs = cal.compress(TRACE, start_s=0, count=5, factor=1, max_duration_s=10_000)
    groups = cal.split_teams(jobs, 2)
    assert groups == [("small",), ("big", "tiny")]  # small: 4 GPUs x 10,000 s is the largest load
    # one node each, then the 4 spare by load (40,000 vs 31,270 GPU-s: 2.24 / 1.76 -> 2 + 1, the last
    # to the larger remainder)
    counts = cal.node_shares(jobs, groups, 6)
    assert counts == [3, 3]
    assert cal.node_shares(jobs, groups, 2) == [1, 1]
    parts = cal.partitions(groups, counts)
    assert [p.hostlist for p in parts] == [f"dgx[01-{counts[0]:02d}]", f"dgx[{counts[0] + 1:02d}-06]"]
    with pytest.raises(ValueError, match="nodes: 1 nodes cannot give each of 2 partitions one"):
        cal.node_shares(jobs, groups, 1)


def test_the_pools_file_routes_each_team_to_the_partition_slurm_allows(tmp_path: Path) -> None:
    parts = [cal.Partition("p1", "dgx[01-02]", ("big",)), cal.Partition("p2", "dgx[03-03]", ("small", "tiny"))]
    lines = cal.slurm_partition_lines(parts, exclusive=False)
    assert (
        lines[1]
        == "PartitionName=p2 Nodes=dgx[03-03] AllowAccounts=small,tiny OverSubscribe=NO MaxTime=UNLIMITED State=UP"
    )
    assert "OverSubscribe=EXCLUSIVE" in cal.slurm_partition_lines(parts, exclusive=True)[0]
    (tmp_path / "fleet.csv").write_text(cal.fleet_csv(3))
    (tmp_path / "pools.toml").write_text(
        cal.pools_toml(parts, exclusive=False, backfill_depth=2000, reservation="slurm-22.05")
    )
    fleet, _ = read_fleet_csv(tmp_path / "fleet.csv")
    plan = plan_pools(tmp_path / "pools.toml", fleet)
    assert [(s.name, len(s.nodes), s.max_tests, s.exclusive, s.reservation) for s in plan.specs] == [
        ("p1", 2, 2000, False, "slurm-22.05"),
        ("p2", 1, 2000, False, "slurm-22.05"),
    ]
    assert (plan.route("tiny", "slurm"), plan.route("big", "slurm"), plan.route("other", "slurm")) == ("p2", "p1", None)


def test_generic_csv_keeps_limits_and_takes_slurms_submit_times(tmp_path: Path) -> None:
    jobs = cal.compress(TRACE, start_s=0, count=2, factor=60, max_duration_s=120)
    (tmp_path / "jobs.csv").write_text(cal.generic_csv(jobs, {"c0001": 31.5}))
    read = read_generic_csv(tmp_path / "jobs.csv").jobs
    assert [(j.submit_s, j.duration_s, j.request.duration_estimate_s) for j in read] == [
        (0.0, 60.0, 120.0),
        (31.5, 1.0, 60.0),
    ]


def sacct(*jobs: dict[str, object]) -> str:
    return json.dumps({"meta": {}, "jobs": list(jobs)}, indent=2)


def test_sacct_json_gives_times_by_name_in_both_number_forms_and_leaves_out_jobs_that_never_ran() -> None:
    text = sacct(
        {"job_id": 1, "name": "c0000", "time": {"submission": 100, "start": 103, "end": 110}},
        {
            "job_id": 2,
            "name": "c0001",
            "time": {
                "submission": {"set": True, "infinite": False, "number": 101},
                "start": {"set": True, "infinite": False, "number": 120},
                "end": {"set": True, "infinite": False, "number": 121},
            },
        },
        {"job_id": 3, "name": "c0002", "time": {"submission": 102, "start": 0, "end": 0}},
    )
    assert cal.parse_sacct_json(text) == {
        "c0000": cal.Timing(100.0, 103.0, 110.0),
        "c0001": cal.Timing(101.0, 120.0, 121.0),
    }


def test_the_recorded_sacct_keeps_what_the_comparison_reads_and_nothing_else() -> None:
    text = sacct(
        {"job_id": 7, "name": "c0000", "account": "big", "partition": "p1", "nodes": "dgx01",
         "time": {"submission": 100, "start": 103, "end": 110, "elapsed": 7}},
    )  # fmt: skip
    record = cal.recorded_sacct(text)
    assert record == {
        "jobs": [{"name": "c0000", "account": "big", "partition": "p1", "nodes": "dgx01",
                  "time": {"submission": 100, "start": 103, "end": 110}}]
    }  # fmt: skip
    assert cal.parse_sacct_json(json.dumps(record)) == cal.parse_sacct_json(text)


LOG = """\
[2026-12-05T14:02:52.376] _slurm_rpc_submit_batch_job: JobId=7 InitPrio=1 usec=569
[2026-12-05T14:02:52.901] sched/backfill: _attempt_backfill: beginning
[2026-12-05T14:02:53.998] _slurm_rpc_submit_batch_job: JobId=8 InitPrio=1 usec=402
[2026-12-05T14:02:54.100] _slurm_rpc_submit_batch_job: JobId=9 InitPrio=1 usec=402
"""


def test_the_log_gives_submissions_to_the_millisecond_aligned_on_saccts_seconds() -> None:
    # The log is local time (here UTC+1): the whole-quarter-hour offset that fits sacct is found; job 9's
    # aligned time falls outside its sacct second and is left out; job 10 is not in the log.
    base = int(datetime(2026, 12, 5, 13, 2, 52, tzinfo=UTC).timestamp())
    text = sacct(
        {"job_id": 7, "name": "a", "time": {"submission": base, "start": base + 1, "end": base + 2}},
        {"job_id": 8, "name": "b", "time": {"submission": base + 1, "start": base + 2, "end": base + 3}},
        {"job_id": 9, "name": "c", "time": {"submission": base + 5, "start": base + 6, "end": base + 7}},
        {"job_id": 10, "name": "d", "time": {"submission": base + 5, "start": base + 6, "end": base + 7}},
    )
    assert cal.log_submit_times(LOG, text) == {7: base + 0.376, 8: base + 1.998}
    record = cal.recorded_sacct(text, LOG)
    timings = cal.parse_sacct_json(json.dumps(record))
    assert timings["a"] == cal.Timing(base, base + 1, base + 2, base + 0.376)
    assert (timings["a"].replay_submit, timings["c"].replay_submit) == (base + 0.376, base + 5)
    assert cal.log_submit_times("", text) == {}


def test_sacct_json_errors_name_the_job_and_the_key() -> None:
    with pytest.raises(ValueError, match="expected an object with a 'jobs' list"):
        cal.parse_sacct_json("[]")
    with pytest.raises(ValueError, match=r"jobs\[0\] \(c0000\): time.end is before time.start"):
        cal.parse_sacct_json(sacct({"name": "c0000", "time": {"submission": 1, "start": 9, "end": 5}}))


def test_slurm_figures_count_gpu_seconds_in_the_submission_window_and_wait_from_submit_to_start() -> None:
    jobs = [
        cal.CalibJob("x", "t", 1, 2, 0, 10, 1),
        cal.CalibJob("y", "t", 1, 8, 5, 10, 1),
        cal.CalibJob("z", "t", 1, 1, 9, 10, 1),
    ]
    timings = {"x": cal.Timing(1000, 1000, 1010), "y": cal.Timing(1005, 1010, 1020), "z": cal.Timing(1010, 1030, 1040)}
    figures = cal.slurm_figures(jobs, timings, capacity_gpus=16)
    # window 1000..1010 (first to last submission): x holds 2 GPUs 10 s, y 8 GPUs 0 s, z none yet
    assert figures["utilisation"] == pytest.approx(20 / 160)
    waits = figures["wait_s"]
    assert isinstance(waits, dict)
    assert (waits["count"], waits["mean"], waits["p50"], waits["max"]) == (3, 25 / 3, 5.0, 20.0)
    timings.pop("z")
    assert cal.slurm_figures(jobs, timings, capacity_gpus=16)["missing"] == 1
    with pytest.raises(ValueError, match="no job of the list"):
        cal.slurm_figures(jobs, {}, capacity_gpus=16)


def test_error_table_is_relative_to_slurm_and_empty_where_slurm_measured_zero() -> None:
    waits = {"mean": 10.0, "p50": 0.0, "p95": 40.0, "p99": 50.0, "max": 60.0}
    sim_waits = {"mean": 11.0, "p50": 1.0, "p95": 30.0, "p99": None, "max": 60.0}
    rows = cal.error_table({"utilisation": 0.8, "wait_s": waits}, {"utilisation": 0.84, "wait_s": sim_waits})
    by_metric = {row["metric"]: row["error"] for row in rows}
    assert list(by_metric) == [
        "utilisation",
        "wait mean (s)",
        "wait p50 (s)",
        "wait p95 (s)",
        "wait p99 (s)",
        "wait max (s)",
    ]
    assert by_metric["utilisation"] == pytest.approx(0.05)
    assert by_metric["wait p95 (s)"] == pytest.approx(-0.25)
    assert by_metric["wait p50 (s)"] is None and by_metric["wait p99 (s)"] is None
    assert by_metric["wait max (s)"] == 0.0


def test_without_a_layout_the_harness_recomputes_the_table_from_the_recorded_slurm_runs() -> None:
    """``make bench`` runs the script bare: no Slurm, one JSON line per recorded run."""
    root = Path(__file__).resolve().parents[2]
    recorded = sorted((root / "benchmarks/data/calibrate_slurm").glob("*.json"))
    assert [path.stem for path in recorded] == ["partitioned", "pooled"]
    done = subprocess.run(
        [sys.executable, str(root / "benchmarks/calibrate_slurm.py")], capture_output=True, text=True, check=True
    )
    reports = [json.loads(line) for line in done.stdout.splitlines()]
    assert [r["layout"] for r in reports] == ["partitioned", "pooled"]
    for report, path in zip(reports, recorded, strict=True):
        assert report["slurm"]["jobs"] == len(json.loads(path.read_text())["jobs"]) == report["jobs"]
        assert [row["metric"] for row in report["table"]][-1] == "wait max (s)"
        assert 0 < report["simulator"]["utilisation"] <= 1
    assert len(reports[0]["partitions"]) == 3 and len(reports[1]["partitions"]) == 1
