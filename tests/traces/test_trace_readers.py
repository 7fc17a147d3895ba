from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from scheduling.engine.types import TopologyLevel, WorkloadKind
from scheduling.traces import (
    TraceFormatError,
    UnknownTrace,
    gang_shape,
    load_trace,
    read_generic_csv,
    read_philly,
    write_generic_csv,
)
from tests.support import require

DEMO_SLICE = Path(__file__).resolve().parents[2] / "scheduling" / "demo_data" / "philly_slice.csv"

GENERIC_HEADER = "id,submit_time,duration,gang_size,gpus_per_member,gpu_model,team,kind\n"


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


class TestPhilly:
    def test_it_reads_every_row_of_the_shipped_slice(self, fixtures: Path) -> None:
        trace = read_philly(fixtures / "philly_slice.csv")

        assert len(trace.jobs) == 184
        assert trace.reports[0].rows_read == 184
        assert trace.reports[0].rows_skipped == 0
        assert Counter(job.request.team for job in trace.jobs) == {
            "6c71a0": 99,
            "11cb48": 42,
            "103959": 16,
            "6214e9": 13,
            "e13805": 9,
            "ee9e8c": 2,
            "2869ce": 2,
            "7f04ca": 1,
        }

    def test_it_keeps_the_gpu_hours_of_the_slice(self, fixtures: Path) -> None:
        trace = read_philly(fixtures / "philly_slice.csv")

        gpu_hours = sum(job.gpus * (job.duration_s or 0) for job in trace.jobs) / 3600

        assert gpu_hours == pytest.approx(1581.35, abs=0.01)

    def test_submit_times_are_seconds_after_the_earliest_stamp_in_order(self, fixtures: Path) -> None:
        trace = read_philly(fixtures / "philly_slice.csv")
        submits = [job.submit_s for job in trace.jobs]

        assert submits[0] == 0.0
        assert submits == sorted(submits)
        assert submits[-1] < 6 * 3600
        assert trace.notes["epoch"].startswith("2017-10-27 06:")

    def test_jobs_larger_than_a_node_become_multi_node_gangs(self, fixtures: Path) -> None:
        trace = read_philly(fixtures / "philly_slice.csv")
        shapes = Counter((job.request.members, job.request.gpus_per_member) for job in trace.jobs)

        assert shapes[(2, 6)] == 2  # the two 12-GPU jobs
        assert shapes[(3, 8)] == 2  # the two 24-GPU jobs
        assert shapes[(4, 8)] == 2  # the two 32-GPU jobs
        gangs = [job for job in trace.jobs if job.request.members > 1]
        assert all(job.request.topology is TopologyLevel.LEAF_SWITCH for job in gangs)
        assert all(job.request.kind is WorkloadKind.TRAINING for job in trace.jobs)

    def test_it_reads_the_demo_slice_as_shipped(self) -> None:
        require(DEMO_SLICE.is_file(), "scheduling/demo_data/philly_slice.csv is not in this checkout")

        trace = read_philly(DEMO_SLICE)

        assert trace.reports[0].rows_skipped == 0
        assert len(trace.jobs) == trace.reports[0].rows_read > 0

    def test_a_malformed_row_names_file_line_and_column(self, tmp_path: Path) -> None:
        path = write(
            tmp_path,
            "bad.csv",
            "timestamp,duration,num_gpus,gpu_time,cluster\n"
            "2017-10-09 07:01:55,66.0,1,66.0,11cb48\n"
            "2017-10-09 07:02:55,66.0,two,66.0,11cb48\n",
        )

        with pytest.raises(TraceFormatError) as caught:
            read_philly(path)

        assert (caught.value.path, caught.value.line, caught.value.column) == (str(path), 3, "num_gpus")
        assert f"{path}:3:3: column 'num_gpus'" in str(caught.value)

    def test_a_bad_timestamp_names_the_timestamp_column(self, tmp_path: Path) -> None:
        path = write(
            tmp_path,
            "bad.csv",
            "timestamp,duration,num_gpus,gpu_time,cluster\nyesterday,66.0,1,66.0,11cb48\n",
        )

        with pytest.raises(TraceFormatError, match=r":2:1: column 'timestamp'"):
            read_philly(path)

    def test_a_short_row_names_the_first_missing_column(self, tmp_path: Path) -> None:
        path = write(tmp_path, "short.csv", "timestamp,duration,num_gpus,gpu_time,cluster\n2017-10-09 07:01:55,66.0\n")

        with pytest.raises(TraceFormatError) as caught:
            read_philly(path)

        assert (caught.value.line, caught.value.column) == (2, "num_gpus")

    def test_a_header_without_a_required_column_is_an_error_on_line_one(self, tmp_path: Path) -> None:
        path = write(tmp_path, "nohdr.csv", "timestamp,duration,gpu_time,cluster\n2017-10-09 07:01:55,66.0,66.0,a\n")

        with pytest.raises(TraceFormatError) as caught:
            read_philly(path)

        assert (caught.value.line, caught.value.column) == (1, "num_gpus")

    def test_skip_mode_counts_every_dropped_row_with_its_reason(self, tmp_path: Path) -> None:
        path = write(
            tmp_path,
            "mixed.csv",
            "timestamp,duration,num_gpus,gpu_time,cluster\n"
            "2017-10-09 07:01:55,66.0,1,66.0,a\n"
            "2017-10-09 07:02:55,-5,1,66.0,a\n"
            "2017-10-09 07:03:55,66.0,0,0,a\n"
            "2017-10-09 07:04:55,66.0,2,132.0,b\n",
        )

        trace = read_philly(path, on_error="skip")
        report = trace.reports[0]

        assert len(trace.jobs) == 2
        assert (report.rows_read, report.rows_kept, report.rows_skipped) == (4, 2, 2)
        assert report.skipped == {"malformed": 1, "no GPUs requested": 1}
        assert any(":3:2: column 'duration'" in message for message in report.messages)


class TestGangShape:
    @pytest.mark.parametrize(
        ("gpus", "shape"),
        [(1, (1, 1)), (8, (1, 8)), (12, (2, 6)), (16, (2, 8)), (24, (3, 8)), (128, (16, 8))],
    )
    def test_it_uses_the_fewest_equal_members_that_fit_a_node(self, gpus: int, shape: tuple[int, int]) -> None:
        assert gang_shape(gpus) == shape

    def test_a_prime_count_above_a_node_falls_back_to_one_gpu_members(self) -> None:
        assert gang_shape(11) == (11, 1)


class TestGenericCsv:
    def test_it_reads_each_column_into_the_request(self, fixtures: Path) -> None:
        trace = read_generic_csv(fixtures / "generic_jobs.csv")
        jobs = {job.id: job for job in trace.jobs}

        train = jobs["train-a"].request
        assert (train.members, train.gpus_per_member, train.gpu_models) == (4, 8, frozenset({"H100"}))
        assert (train.team, train.kind, train.priority, train.orchestrator) == (
            "vision",
            WorkloadKind.TRAINING,
            10,
            "slurm",
        )
        assert jobs["train-a"].duration_s == 7200

    def test_a_share_below_one_gpu_becomes_a_milli_gpu_request(self, fixtures: Path) -> None:
        serve = {job.id: job for job in read_generic_csv(fixtures / "generic_jobs.csv").jobs}["serve-x"].request

        assert (serve.gpus_per_member, serve.gpu_milli, serve.members) == (0, 500, 2)
        assert serve.gpus == 1.0
        assert serve.gpu_models == frozenset({"A10", "L4"})

    def test_it_reports_columns_it_does_not_know(self, fixtures: Path) -> None:
        report = read_generic_csv(fixtures / "generic_jobs.csv").reports[0]

        assert report.ignored_columns == ("note",)
        assert (report.rows_read, report.rows_kept) == (5, 5)

    def test_strict_mode_stops_at_the_first_malformed_row(self, fixtures: Path) -> None:
        with pytest.raises(TraceFormatError) as caught:
            read_generic_csv(fixtures / "malformed_generic.csv")

        assert (caught.value.line, caught.value.column) == (3, "gang_size")
        assert str(fixtures / "malformed_generic.csv") in str(caught.value)

    def test_skip_mode_names_every_malformed_cell(self, fixtures: Path) -> None:
        trace = read_generic_csv(fixtures / "malformed_generic.csv", on_error="skip")
        report = trace.reports[0]

        assert len(trace.jobs) == 2
        assert report.skipped == {"malformed": 3}
        assert [m.split(": ", 1)[0].rsplit(":", 2)[1] for m in report.messages] == ["3", "5", "6"]
        assert "column 'gpus_per_member'" in report.messages[1]
        assert "column 'kind'" in report.messages[2]

    def test_skip_mode_counts_a_row_with_too_few_or_too_many_fields(self, tmp_path: Path) -> None:
        rows = "a,0,1,1,1,,t,batch\nb,1,1\nc,2,1,1,1,,t,batch,extra\nd,3,1,1,1,,t,batch\n"
        path = write(tmp_path, "short.csv", GENERIC_HEADER + rows)

        with pytest.raises(TraceFormatError, match=r":3:4: column 'gang_size': missing value \(3 of 8 fields\)"):
            read_generic_csv(path)
        trace = read_generic_csv(path, on_error="skip")
        report = trace.reports[0]
        assert [job.id for job in trace.jobs] == ["a", "d"]
        assert report.malformed_by_column == {"#9": 1, "gang_size": 1}
        assert ":4:9: column '#9': extra field (9 of 8 fields)" in report.messages[1]

    def test_duplicate_ids_are_an_error(self, tmp_path: Path) -> None:
        path = write(tmp_path, "dup.csv", GENERIC_HEADER + "a,0,1,1,1,,t,batch\na,1,1,1,1,,t,batch\n")

        with pytest.raises(TraceFormatError, match=r":3:1: column 'id': duplicate"):
            read_generic_csv(path)

    def test_the_writer_output_reads_back_to_the_same_jobs(self, fixtures: Path, tmp_path: Path) -> None:
        original = read_generic_csv(fixtures / "generic_jobs.csv")

        write_generic_csv(tmp_path / "out.csv", original.jobs)
        again = read_generic_csv(tmp_path / "out.csv")

        assert [job.request for job in again.jobs] == [job.request for job in original.jobs]


class TestRegistry:
    def test_an_unknown_name_lists_the_known_ones(self) -> None:
        with pytest.raises(UnknownTrace, match="philly"):
            load_trace("no-such-trace")

    def test_a_path_is_read_by_the_format_its_header_shows(self, fixtures: Path) -> None:
        assert len(load_trace(str(fixtures / "philly_slice.csv")).jobs) == 184
        assert len(load_trace(str(fixtures / "generic_jobs.csv")).jobs) == 5

    def test_a_file_of_no_known_format_is_refused(self, tmp_path: Path) -> None:
        path = write(tmp_path, "x.csv", "a,b\n1,2\n")

        with pytest.raises(UnknownTrace, match="matches no known format"):
            load_trace(str(path))
