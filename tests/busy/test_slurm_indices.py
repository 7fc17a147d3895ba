"""Slurm GPU indices end to end: a real slurmrestd v0.0.38 answer -> collector -> ingest -> the busy-time
attribution, which then joins DCGM samples to jobs by node *and* GPU index (no per-node guess)."""

from datetime import UTC, datetime

import numpy as np
import pytest

from scheduling.collectors import slurm
from scheduling.collectors.prometheus import DcgmWindow, GpuSeries, JobLabels
from scheduling.models import Orchestrator, Workload
from scheduling.services.busy import Plan, attribute, holdings_for
from scheduling.services.ingest import ingest_snapshot
from tests.collectors.conftest import load_fixture

pytestmark = pytest.mark.django_db
STEP, POINTS = 15.0, 4
START = 1796225600.0  # just after the sample's jobs started (start_time 1796225571)


@pytest.fixture
def ingested(teams):
    source = Orchestrator.objects.create(name="slurm-a", kind="slurm", endpoint="https://slurm.example:6820")
    snapshot = slurm.build_snapshot(
        "slurm-a",
        load_fixture("slurm", "v0.0.38_nodes.json"),
        load_fixture("slurm", "v0.0.38_jobs.json"),
        load_fixture("slurm", "v0.0.38_partitions.json"),
        taken_at=datetime.fromtimestamp(START, tz=UTC),
    )
    ingest_snapshot(source, snapshot)
    return source


def test_ingest_stores_the_gpu_indices_slurm_reported_for_each_job_and_node(ingested):
    nodes = {w.external_id: w.nodes for w in Workload.objects.filter(orchestrator=ingested)}
    assert nodes["1"] == [{"node": "dgx02", "gpus": list(range(8))}, {"node": "dgx03", "gpus": list(range(8))}]
    assert nodes["2"] == [{"node": "dgx01", "gpus": [1, 2, 3, 4]}]
    assert nodes["3"] == [{"node": "dgx01", "gpus": [0]}]
    assert all(not places for ext, places in nodes.items() if ext not in ("1", "2", "3"))  # pending


def test_busy_time_on_a_shared_node_goes_to_the_job_holding_each_gpu(ingested):
    # dgx01: GPU 0 (job 3) at 100 %, GPUs 1-4 (job 2) at 50 %, GPUs 5-7 held by nobody at 25 %.
    util = {"dgx01": [1.0, 0.5, 0.5, 0.5, 0.5, 0.25, 0.25, 0.25], "dgx02": [0.9] * 8, "dgx03": [0.1] * 8}
    series = tuple(
        GpuSeries(host, gpu, f"GPU-{host}-{gpu}", "H100", JobLabels(), np.full(POINTS, value))
        for host, values in util.items()
        for gpu, value in enumerate(values)
    )
    window = DcgmWindow(START, STEP, POINTS, "DCGM_FI_DEV_GPU_UTIL", series)
    holdings, workloads = holdings_for(Plan(START, STEP, POINTS, 0, ()), [ingested])
    result = attribute(window, holdings, threshold=0.05, grace_s=300.0)
    busy = {workloads[pk].external_id: float(v.sum()) / POINTS for pk, v in result.busy.items()}
    assert busy == pytest.approx({"1": 8 * 0.9 + 8 * 0.1, "2": 4 * 0.5, "3": 1.0})
    assert result.proportional == set()  # every job attributed by index, none per node
    assert float(result.unattributed["dgx01"].sum()) / POINTS == pytest.approx(3 * 0.25)


def test_slurms_uint32_priorities_are_stored_whole(ingested):
    # priority/basic counts down from 0xFFFEFFFF: beyond a 32-bit signed column, PostgreSQL refused them.
    assert Workload.objects.get(orchestrator=ingested, external_id="1").priority == 4294901759
