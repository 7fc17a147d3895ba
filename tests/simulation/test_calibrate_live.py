"""benchmarks/calibrate_slurm.py end to end on a tiny window (12 jobs, about a minute) against the real
Slurm fixture on its own ports (27417..) and state dir: every job runs in its team's partition, within
its whole-minute limit, and the report compares Slurm's figures with the simulator's."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.collectors.conftest import SLURM_BINARIES, require_live
from tests.support import port_open, require

REPO = Path(__file__).resolve().parents[2]


def test_a_tiny_partitioned_window_runs_on_slurm_and_is_compared_with_the_simulator(tmp_path: Path) -> None:
    require_live("Slurm", [*SLURM_BINARIES, "slurmdbd"])
    require(port_open("127.0.0.1", 3306), "MariaDB (Slurm accounting) is not listening on 127.0.0.1:3306")
    done = subprocess.run(
        [
            sys.executable,
            str(REPO / "benchmarks/calibrate_slurm.py"),
            "--layout",
            "partitioned",
            "--tag",
            "smoke",
            "--jobs",
            "12",
            "--factor",
            "600",
            "--max-duration",
            "8",
            "--nodes",
            "3",
            "--groups",
            "2",
            "--out",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout)
    assert report["slurm"]["jobs"] == 12 and report["slurm"]["missing"] == 0
    assert [row["metric"] for row in report["table"]][:2] == ["utilisation", "wait mean (s)"]
    assert 0 < report["simulator"]["utilisation"] <= 1 and 0 < report["slurm"]["utilisation"] <= 1

    partition_of = {team: part["name"] for part in report["partitions"] for team in part["teams"]}
    planned = {
        row.split(",")[0]: row.split(",") for row in (tmp_path / "partitioned-jobs.csv").read_text().splitlines()[1:]
    }
    jobs = json.loads((tmp_path / "sacct-smoke.json").read_text())["jobs"]
    assert len(jobs) == 12
    for job in jobs:
        times = job["time"]
        ran = times["end"] - times["start"]
        duration, limit = float(planned[job["name"]][2]), float(planned[job["name"]][9])
        assert job["partition"] == partition_of[job["account"]]
        assert duration - 1 <= ran <= limit, (job["name"], ran, duration, limit)
        assert job["state"]["current"] == "COMPLETED"
    recorded = json.loads((tmp_path / "partitioned.json").read_text())
    assert recorded["arguments"]["topology"] == "one-leaf"
    assert {job["nodes"] for job in recorded["jobs"]} <= {"dgx01", "dgx02", "dgx03"}  # kept for job-by-job study
    assert "sched/backfill" in (tmp_path / "slurmctld-smoke.log").read_text()
    # each submission to the millisecond from that log (sacct keeps whole seconds)
    assert all("submission_log" in job["time"] for job in recorded["jobs"])
    assert report["reservation"] == "slurm-22.05" and len(report["table_earliest"]) == len(report["table"])
