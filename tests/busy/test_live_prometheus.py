"""Busy and idle-allocated GPU time after real Prometheus scrapes of our DCGM-format exporter.

The exporter serves constant percentages per GPU (conftest.FLEET), so the busy GPU-seconds of any
window are known exactly: 6 s of dgx00 GPUs 0+1 (100 % + 50 %) are 9 busy GPU-seconds, and so on.
"""

import math
import time
from datetime import UTC, datetime

import pytest

from scheduling.models import Node, Orchestrator, UsageRollup, UsageSample, Workload, WorkloadUtilisation
from scheduling.services import collection
from scheduling.services.busy import measure_busy
from scheduling.services.orchestrators import build_prometheus_collector

pytestmark = [pytest.mark.live, pytest.mark.django_db]

SPAN, ROUND = 6, 3  # seconds measured; seconds per scheduler round (two rounds)


def at(epoch: float) -> datetime:
    return datetime.fromtimestamp(epoch, tz=UTC)


@pytest.fixture(autouse=True)
def short_grace(settings):
    settings.GPUPORTAL_IDLE_GRACE_S = 3
    settings.GPUPORTAL_IDLE_THRESHOLD_PCT = 5


def settled_start(live) -> float:
    """A whole second t0 such that [t0 - look-back, t0 + SPAN + lag] is (or soon is) in Prometheus."""
    t0 = max(math.ceil(live.started_at) + 5, math.floor(time.time()) - SPAN - 3)
    live.wait_until(t0 + SPAN + 2.5)
    return float(t0)


@pytest.fixture
def scene(teams):
    """Slurm (indices for jobs 101/102, none for 103) and Kubernetes (a pod the exporter labels)."""
    slurm = Orchestrator.objects.create(name="slurm-a", kind="slurm", endpoint="https://slurm.example")
    k8s = Orchestrator.objects.create(name="k8s-b", kind="kubernetes", endpoint="https://k8s.example")
    for name, owner in (("dgx00", slurm), ("dgx01", slurm), ("k8s00", k8s)):
        Node.objects.create(orchestrator=owner, name=name, gpu_model="H100", gpu_total=4)
    return {"slurm": slurm, "k8s": k8s, "teams": teams}


def run_jobs(scene, t0: float) -> dict[str, Workload]:
    teams, slurm, k8s = scene["teams"], scene["slurm"], scene["k8s"]
    make = lambda orch, ext, team, nodes, gpus: Workload.objects.create(  # noqa: E731
        orchestrator=orch,
        external_id=ext,
        team=teams[team],
        gang_size=1,
        gpus_per_member=gpus,
        state=Workload.State.RUNNING,
        submitted_at=at(t0 - 60),
        started_at=at(t0),
        nodes=nodes,
    )
    jobs = {
        "101": make(slurm, "101", "nlp", [{"node": "dgx00", "gpus": [0, 1]}], 2),
        "102": make(slurm, "102", "production", [{"node": "dgx00", "gpus": [2]}], 1),
        "103": make(slurm, "103", "research", [{"node": "dgx01", "gpus": []}], 2),
        "pod": make(k8s, "vision/pod/serve-0", "production", [{"node": "k8s00", "gpus": []}], 1),
    }
    allocated = {slurm: {"nlp": 2, "production": 1, "research": 2}, k8s: {"production": 1}}
    for orch, per_team in allocated.items():
        for n in (1, 2):
            taken = at(t0 + n * ROUND)
            UsageSample.objects.create(
                taken_at=taken, orchestrator=orch, gpus_total=8, gpus_allocated=sum(per_team.values()), interval_s=ROUND
            )
            for slug, gpus in per_team.items():
                UsageSample.objects.create(
                    taken_at=taken, orchestrator=orch, team=teams[slug], gpus_allocated=gpus, interval_s=ROUND
                )
    return jobs


def prometheus_source(live, **options) -> Orchestrator:
    return Orchestrator.objects.create(
        name="dcgm", kind="prometheus", endpoint=live.url, options={"step_s": 1, "lag_s": 1, **options}
    )


def busy(orch, team=None) -> list[float]:
    rows = UsageSample.objects.filter(orchestrator=orch, team=team).order_by("taken_at")
    return [round(r.gpus_busy, 6) if r.gpus_busy is not None else None for r in rows]


def test_it_stores_the_exact_busy_gpu_seconds_per_team_and_pool_next_to_allocation(live_prometheus, scene):
    t0 = settled_start(live_prometheus)
    run_jobs(scene, t0)
    source = prometheus_source(live_prometheus)
    with build_prometheus_collector(source, None) as collector:
        outcome = measure_busy(source, collector, now=at(t0 + SPAN + 2))
    teams, slurm, k8s = scene["teams"], scene["slurm"], scene["k8s"]
    assert outcome.samples_filled == 12
    assert busy(slurm) == [3.12, 3.12]  # dgx00: 1 + .5 + .02; dgx01: .8 + .8
    assert busy(slurm, teams["nlp"]) == [1.5, 1.5]
    assert busy(slurm, teams["production"]) == [0.02, 0.02]
    assert busy(slurm, teams["research"]) == [1.6, 1.6]
    assert busy(k8s) == [0.9, 0.9]  # the labelled pod's .6 and an unheld GPU at .3
    assert busy(k8s, teams["production"]) == [0.6, 0.6]
    assert outcome.unknown_hosts == ("ghost01",)
    assert outcome.proportional_workloads == 1 and outcome.labelled_workloads == 1
    hourly = UsageRollup.objects.filter(resolution="hour", orchestrator=slurm, team=None)
    assert sum(r.gpu_s_busy for r in hourly) == pytest.approx(3.12 * SPAN)
    assert sum(r.gpu_s_allocated for r in hourly) == pytest.approx(5 * SPAN)


def test_it_lists_busy_and_idle_allocated_gpu_seconds_per_job(live_prometheus, scene):
    t0 = settled_start(live_prometheus)
    jobs = run_jobs(scene, t0)
    source = prometheus_source(live_prometheus)
    with build_prometheus_collector(source, None) as collector:
        measure_busy(source, collector, now=at(t0 + SPAN + 2))
    use = {key: WorkloadUtilisation.objects.get(workload=w) for key, w in jobs.items()}
    assert (use["101"].busy_gpu_s, use["101"].allocated_gpu_s, use["101"].idle_allocated_gpu_s) == (
        pytest.approx(1.5 * SPAN),
        pytest.approx(2.0 * SPAN),
        0.0,
    )
    # job 102 sits at 2 % on its GPU: idle-allocated for the whole window once past the 3 s grace
    assert use["102"].idle_allocated_gpu_s == pytest.approx(SPAN)
    assert use["102"].busy_gpu_s == pytest.approx(0.02 * SPAN)
    assert use["103"].busy_gpu_s == pytest.approx(1.6 * SPAN)  # the two busiest GPUs of dgx01, per node
    assert use["pod"].busy_gpu_s == pytest.approx(0.6 * SPAN)
    assert use["101"].samples == SPAN and use["101"].last_sample_at == at(t0 + SPAN)


def test_a_scrape_task_round_fills_busy_once_and_a_second_round_changes_nothing(live_prometheus, scene):
    t0 = settled_start(live_prometheus)
    jobs = run_jobs(scene, t0)
    source = prometheus_source(live_prometheus, lag_s=0.5)
    first = collection.scrape(source.pk)
    assert first.run.ok, first.run.error
    assert "1 workloads attributed per node" in first.run.error and "ghost01" in first.run.error
    assert busy(scene["slurm"]) == [3.12, 3.12]
    before = WorkloadUtilisation.objects.get(workload=jobs["101"]).busy_gpu_s
    second = collection.scrape(source.pk)
    assert second.run.ok
    assert WorkloadUtilisation.objects.get(workload=jobs["101"]).busy_gpu_s == before == pytest.approx(1.5 * SPAN)
    source.refresh_from_db()
    assert not source.is_stale


def test_a_prometheus_outage_marks_the_source_stale_and_leaves_allocation_alone_then_it_catches_up(
    live_prometheus, scene
):
    t0 = settled_start(live_prometheus)
    jobs = run_jobs(scene, t0)
    source = prometheus_source(live_prometheus, lag_s=0.5)
    allocated_before = list(UsageSample.objects.order_by("pk").values_list("gpus_allocated", flat=True))
    live_prometheus.stop()
    try:
        outage = collection.scrape(source.pk)
    finally:
        live_prometheus.start()
    source.refresh_from_db()
    assert not outage.run.ok and source.is_stale
    assert busy(scene["slurm"]) == [None, None]
    assert list(UsageSample.objects.order_by("pk").values_list("gpus_allocated", flat=True)) == allocated_before
    assert Workload.objects.filter(state=Workload.State.RUNNING).count() == len(jobs)
    assert not WorkloadUtilisation.objects.exists()
    recovered = collection.scrape(source.pk)
    source.refresh_from_db()
    assert recovered.run.ok and not source.is_stale
    assert busy(scene["slurm"]) == [3.12, 3.12]


def test_samples_of_an_orchestrator_the_source_does_not_watch_stay_not_measured(live_prometheus, scene):
    t0 = settled_start(live_prometheus)
    run_jobs(scene, t0)
    source = prometheus_source(live_prometheus, orchestrators=["k8s-b"])
    with build_prometheus_collector(source, None) as collector:
        measure_busy(source, collector, now=at(t0 + SPAN + 2))
    assert busy(scene["slurm"]) == [None, None]
    assert busy(scene["k8s"]) == [0.9, 0.9]
