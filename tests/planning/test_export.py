"""The portal's recorded history as the simulator's generic CSV, and back."""

import pytest
from django.core.management import call_command

from scheduling.selectors.planning import history_trace_jobs
from scheduling.traces.generic import read_generic_csv, write_generic_csv

pytestmark = pytest.mark.django_db


def test_exported_history_round_trips_through_read_generic_csv(recorded, tmp_path):
    export = history_trace_jobs(recorded, weeks=2)
    path = tmp_path / "history.csv"
    assert write_generic_csv(path, export.jobs) == len(export.jobs) == 302
    trace = read_generic_csv(path)
    assert trace.rows_skipped == 0
    assert trace.jobs == export.jobs


def test_the_export_keeps_what_ran_and_counts_what_it_leaves_out(recorded):
    export = history_trace_jobs(recorded, weeks=2)
    jobs = {job.id: job for job in export.jobs}
    assert "slurm-a:too-old" not in jobs  # outside the window
    assert jobs["slurm-a:running"].duration_s == 2 * 3600  # running until the end of the window
    assert jobs["k8s:pending"].duration_s == 3600 and jobs["k8s:pending"].request.orchestrator == "kubernetes"
    assert export.skipped == {"pending without a duration estimate": 1, "cancelled before it started": 1}
    assert all(0 <= job.submit_s < 14 * 86400 for job in export.jobs)
    assert [job.submit_s for job in export.jobs] == sorted(job.submit_s for job in export.jobs)
    gang = next(job for job in export.jobs if job.request.members == 2)
    assert gang.request.orchestrator == "slurm" and gang.request.gpus == 16


def test_export_history_writes_the_file_and_reports_the_window(recorded, tmp_path, capsys):
    path = tmp_path / "out.csv"
    call_command("export_history", "--weeks", "2", "--out", str(path), "--until", recorded.isoformat())
    out, err = capsys.readouterr()
    assert out.startswith("302 jobs from ") and "left out 1: cancelled before it started" in err
    assert len(read_generic_csv(path).jobs) == 302


def test_export_history_refuses_zero_weeks(tmp_path):
    from django.core.management.base import CommandError

    with pytest.raises(CommandError, match="--weeks must be at least 1"):
        call_command("export_history", "--weeks", "0", "--out", str(tmp_path / "x.csv"))
