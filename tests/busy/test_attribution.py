"""Attribution of per-GPU DCGM samples to workloads: pure arrays, no database, no Prometheus."""

import numpy as np
import pytest

from scheduling.collectors.prometheus import DcgmWindow, GpuSeries, JobLabels
from scheduling.services.busy import Holding, attribute, hostname_resolver, idle_seconds

POINTS, STEP = 8, 15.0


NO_JOB = JobLabels()


def gpu(host, index, util, job=NO_JOB):
    values = np.full(POINTS, float(util)) if np.isscalar(util) else np.asarray(util, dtype=float)
    return GpuSeries(host, index, f"GPU-{host}-{index}", "H100", job, values)


def window(*series):
    return DcgmWindow(0.0, STEP, POINTS, "DCGM_FI_DEV_GPU_UTIL", tuple(series))


def holding(workload, node, gpus=(), count=None, first=0, last=POINTS, keys=()):
    return Holding(workload, node, tuple(gpus), count if count is not None else len(gpus), first, last, frozenset(keys))


def run(win, holdings, threshold=0.05, grace=30.0, resolve=lambda h: h):
    return attribute(win, holdings, threshold, grace, resolve)


def test_it_gives_each_workload_the_busy_time_of_the_gpus_the_scheduler_named():
    result = run(window(gpu("n1", 0, 1.0), gpu("n1", 1, 0.5), gpu("n1", 2, 0.25)), [holding(1, "n1", [0, 1])])
    assert result.busy[1].sum() == pytest.approx(1.5 * POINTS)
    assert result.unattributed["n1"].sum() == pytest.approx(0.25 * POINTS)
    assert result.node_busy["n1"].sum() == pytest.approx(1.75 * POINTS)


def test_it_takes_the_busiest_gpus_of_a_node_as_the_held_ones_when_indices_are_unknown_and_says_so():
    series = [gpu("n1", i, u) for i, u in enumerate([0.9, 0.1, 0.8, 0.0])]
    result = run(window(*series), [holding(7, "n1", count=1), holding(8, "n1", count=1)])
    # two GPUs held: the two busiest (0.9 + 0.8) are split evenly between two one-GPU workloads
    assert result.busy[7].sum() == pytest.approx(0.85 * POINTS)
    assert result.busy[8].sum() == pytest.approx(0.85 * POINTS)
    assert result.unattributed["n1"].sum() == pytest.approx(0.1 * POINTS)
    assert result.proportional == {7, 8}


def test_it_splits_a_fractional_share_of_the_next_busiest_gpu():
    series = [gpu("n1", i, u) for i, u in enumerate([1.0, 0.5, 0.0])]
    result = run(window(*series), [holding(3, "n1", count=1.5)])
    assert result.busy[3][0] == pytest.approx(1.25)


def test_it_follows_the_exporter_job_label_over_the_scheduler_guess():
    labelled = gpu("n1", 3, 0.6, JobLabels(hpc_job="42"))
    result = run(window(gpu("n1", 0, 1.0), labelled), [holding(42, "n1", count=1, keys={"slurm:42"})])
    assert result.busy[42].sum() == pytest.approx(0.6 * POINTS)
    assert result.by_label == {42}
    assert result.unattributed["n1"].sum() == pytest.approx(1.0 * POINTS)


def test_it_reports_busy_time_on_hosts_nobody_holds_as_unattributed_never_guessed():
    result = run(window(gpu("ghost", 0, 0.4)), [holding(1, "n1", [0])])
    assert 1 not in result.busy
    assert result.unattributed["ghost"].sum() == pytest.approx(0.4 * POINTS)


def test_it_counts_only_the_steps_a_workload_was_running():
    result = run(window(gpu("n1", 0, 1.0)), [holding(1, "n1", [0], first=2, last=5)])
    assert result.busy[1].sum() == pytest.approx(3.0)
    assert result.allocated[1].sum() == pytest.approx(3.0)


def test_it_books_a_whole_idle_run_once_it_outlasts_the_grace_period():
    # 15 s steps, 30 s grace: the run passes the grace at its third step and books 45 s there
    booked = idle_seconds(np.array([[0.0, 0.0, 0.0, 0.0, 0.5, 0.0, 0.0, np.nan]]), STEP, 0.05, 30.0)
    assert booked.tolist() == [[0.0, 0.0, 45.0, 15.0, 0.0, 0.0, 0.0, 0.0]]


def test_it_books_the_same_idle_time_whether_a_run_is_read_in_one_piece_or_two():
    utils = np.array([[0.9, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]])
    whole = idle_seconds(utils, STEP, 0.05, 30.0)[0].sum()
    # second read starts 3 steps (grace + one step) before step 5 and books only steps >= 5
    first = idle_seconds(utils[:, :5], STEP, 0.05, 30.0)[0].sum()
    second = idle_seconds(utils[:, 2:], STEP, 0.05, 30.0)[0][3:].sum()
    assert first + second == pytest.approx(whole) == pytest.approx(7 * STEP)


def test_it_marks_an_allocated_gpu_under_the_threshold_as_idle_allocated():
    result = run(window(gpu("n1", 0, 0.02), gpu("n1", 1, 0.9)), [holding(1, "n1", [0]), holding(2, "n1", [1])])
    assert result.idle_s[1].sum() == pytest.approx(POINTS * STEP)
    assert result.idle_s[2].sum() == 0


def test_it_judges_idleness_of_a_proportional_workload_on_its_mean_gpu():
    series = [gpu("n1", 0, 0.01), gpu("n1", 1, 0.02), gpu("n1", 2, 0.0), gpu("n1", 3, 0.0)]
    result = run(window(*series), [holding(5, "n1", count=2)])
    assert result.idle_s[5].sum() == pytest.approx(2 * POINTS * STEP)


def test_it_never_calls_a_gpu_without_samples_idle():
    result = run(window(gpu("n1", 0, [np.nan] * POINTS)), [holding(1, "n1", [0])])
    assert result.idle_s[1].sum() == 0
    assert result.allocated[1].sum() == 0


def test_it_matches_short_exporter_hostnames_to_long_node_names():
    resolve = hostname_resolver(["dgx00.cluster.local", "dgx01"])
    assert resolve("dgx00") == "dgx00.cluster.local"
    assert resolve("dgx01.cluster.local") == "dgx01"
    assert resolve("ghost") == "ghost"
