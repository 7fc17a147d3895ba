"""Readers against the public traces in ../shared/traces (skipped when that directory is absent)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from scheduling.engine.types import MILLI_PER_GPU
from scheduling.traces import (
    load_trace,
    read_gpu_time_samples,
    read_helios_vc_occupancy,
    read_helios_vc_sizes,
    read_openb_nodes,
    read_openb_pods,
    read_philly_vc_nodes,
    read_tiresias_cluster,
    read_tiresias_jobs,
)
from scheduling.traces.helios import VcMinute
from scheduling.traces.nodes import read_node_list
from tests.support import require

OPENB = Path("alibaba-clusterdata/cluster-trace-gpu-v2023/csv")
EARTH = Path("helios/HeliosArtifact/analysis/2_cluster characterization/Earth_vcs")


def test_openb_gpu_nodes_hold_6212_gpus_on_1213_nodes(shared_traces: Path) -> None:
    nodes, report = read_openb_nodes(shared_traces / OPENB / "openb_node_list_gpu_node.csv")

    assert (len(nodes), sum(node.gpu_total for node in nodes), report.rows_skipped) == (1213, 6212, 0)
    assert Counter(node.gpu_total for node in nodes) == {1: 24, 2: 518, 4: 54, 8: 617}
    assert sum(node.gpu_total for node in nodes if node.gpu_model == "G2") == 4392


def test_openb_default_pods_split_into_cpu_shared_and_whole_gpu_requests(shared_traces: Path) -> None:
    jobs, report = read_openb_pods(shared_traces / OPENB / "openb_pod_list_default.csv")
    requests = [job.request for job in jobs]

    assert (len(jobs), report.rows_skipped) == (8152, 0)
    assert sum(1 for r in requests if r.gpus == 0) == 1088
    assert sum(1 for r in requests if 0 < r.gpu_milli < MILLI_PER_GPU) == 3078
    assert sum(1 for r in requests if r.gpus_per_member == 8) == 44
    assert sum(r.gpus for r in requests) == pytest.approx(6086.8, abs=0.01)


def test_openb_gpu_spec_becomes_allowed_models(shared_traces: Path) -> None:
    jobs, _ = read_openb_pods(shared_traces / OPENB / "openb_pod_list_gpuspec33.csv")

    constrained = [job.request.gpu_models for job in jobs if job.request.gpu_models]

    assert len(constrained) == 2388
    assert all(models for models in constrained)


def test_the_full_philly_list_has_82247_jobs_in_15_vcs(shared_traces: Path) -> None:
    trace = load_trace("philly", traces_dir=shared_traces)

    assert (len(trace.jobs), trace.rows_skipped, len(trace.teams())) == (82247, 0, 15)
    assert sum(job.gpus * (job.duration_s or 0) for job in trace.jobs) / 3600 == pytest.approx(
        978_078, rel=1e-3
    )


def test_tiresias_jobs_and_cluster_shapes(shared_traces: Path) -> None:
    trace = read_tiresias_jobs(shared_traces / "tiresias/simulator/60_job.csv")
    nodes = read_tiresias_cluster(shared_traces / "tiresias/simulator/n160g8.csv")

    assert Counter(job.request.gpus for job in trace.jobs) == {1: 30, 2: 10, 4: 10, 8: 10}
    assert (len(nodes), sum(node.gpu_total for node in nodes)) == (160, 1280)
    assert len({node.leaf_switch for node in nodes}) == 5


def test_tiresias_tf_job_reports_its_extra_columns(shared_traces: Path) -> None:
    trace = read_tiresias_jobs(shared_traces / "tiresias/simulator/tf_job.csv")

    assert "start_time" in trace.reports[0].ignored_columns


def test_yarn_gpu_time_samples_are_all_read(shared_traces: Path) -> None:
    samples, report = read_gpu_time_samples(shared_traces / "tiresias/simulator/yarn-gput1000.csv")

    assert len(samples) == report.rows_read == 1001


def test_helios_daily_vc_sizes_sum_to_their_total(shared_traces: Path) -> None:
    days, report = read_helios_vc_sizes(shared_traces / EARTH / "Earth_gpu_number.csv")

    assert (len(days), report.rows_skipped) == (181, 0)
    assert all(day.total == sum(day.gpus.values()) for day in days)


def allocation_ratio(minutes: tuple[VcMinute, ...]) -> float:
    """Mean running/capacity over the minutes with capacity: the measured siloed allocation."""
    used = sum(minute.running_gpus for minute in minutes if minute.capacity_gpus)
    capacity = sum(minute.capacity_gpus for minute in minutes if minute.capacity_gpus)
    return used / capacity


def test_helios_vc_minutes_reproduce_the_published_allocation(shared_traces: Path) -> None:
    minutes, _ = read_helios_vc_occupancy(shared_traces / EARTH / "vcLJZ" / "cluster_sequence_vc.csv")

    assert len(minutes) == 44640
    assert minutes[1].time_s == 60.0
    assert allocation_ratio(minutes) == pytest.approx(0.872, abs=0.001)


def test_philly_vc_node_counts(shared_traces: Path) -> None:
    nodes, _ = read_philly_vc_nodes(
        shared_traces / "helios/HeliosArtifact/framework/QSSF Service/data/philly_vc.csv"
    )

    assert (len(nodes), sum(nodes.values())) == (11, 352)


SPOT_NODES = Path("alibaba-clusterdata/cluster-trace-v2026-spot-gpu/node_info_df.csv")


def test_the_alibaba_2026_spot_gpu_fleet_has_4278_nodes_of_six_models(shared_traces: Path) -> None:
    path = shared_traces / SPOT_NODES
    require(path.is_file(), f"{path} absent (alibaba/clusterdata cluster-trace-v2026-spot-gpu, see docs/simulator.md)")
    nodes, report = read_node_list(path)

    assert (len(nodes), report.rows_skipped) == (4278, 0)
    assert len({node.gpu_model for node in nodes}) == 6  # the README's "6 GPU card types"
    by_model = Counter(node.gpu_model for node in nodes)
    assert by_model["A10"] == 2494 and by_model["H800"] == 219
    assert Counter(node.gpu_total for node in nodes if node.gpu_model == "GPU-series-1") == {1: 902, 8: 77, 4: 10}
