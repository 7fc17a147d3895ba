from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from scheduling.engine.placement import POLICIES
from scheduling.engine.types import MILLI_PER_GPU, Node, Request, WorkloadKind
from scheduling.simulation import run_packing, simulate_replay
from scheduling.simulation.cpu_only import CpuOnlyPlacer
from scheduling.simulation.packing import inflate_and_shuffle
from scheduling.simulation.stats import percentile
from scheduling.traces import read_philly
from scheduling.traces.records import Trace, TraceJob

PHILLY_SLICE = Path(__file__).resolve().parents[1] / "traces" / "fixtures" / "philly_slice.csv"


def job(name: str, team: str, submit: float, duration: float, gpus: int, members: int = 1) -> TraceJob:
    request = Request(
        id=name,
        members=members,
        gpus_per_member=gpus,
        team=team,
        kind=WorkloadKind.TRAINING,
        duration_estimate_s=duration,
        submitted_at=submit,
    )
    return TraceJob(request=request, submit_s=submit, duration_s=duration)


def without_wall_time(figures: dict[str, object]) -> dict[str, object]:
    return {key: value for key, value in figures.items() if key != "wall_time_s"}


@pytest.fixture(scope="module")
def philly_slice() -> Trace:
    return read_philly(PHILLY_SLICE)


class TestReplay:
    @pytest.mark.parametrize("policy", ["siloed", "federated", "random"])
    def test_the_same_seed_gives_the_same_figures(self, philly_slice: Trace, policy: str) -> None:
        first = simulate_replay(philly_slice, policy, seed=7, capacity_gpus=96)
        second = simulate_replay(philly_slice, policy, seed=7, capacity_gpus=96)

        assert without_wall_time(first.as_dict()) == without_wall_time(second.as_dict())

    @pytest.mark.parametrize("policy", ["siloed", "federated", "best-fit"])
    def test_it_never_allocates_more_gpus_than_the_fleet_has(self, philly_slice: Trace, policy: str) -> None:
        figures = simulate_replay(philly_slice, policy, capacity_gpus=64).as_dict()

        assert 0 < figures["max_allocated_gpus"] <= figures["capacity_gpus"] == 64
        assert 0 < figures["utilisation"] <= figures["allocation"] <= 1.0

    @pytest.mark.parametrize("policy", ["siloed", "federated"])
    def test_every_arrived_job_is_completed_running_queued_or_rejected(self, philly_slice: Trace, policy: str) -> None:
        # Stopping after three hours leaves work in every state.
        jobs = simulate_replay(philly_slice, policy, capacity_gpus=64, horizon_s=3 * 3600).as_dict()["jobs"]

        accounted = jobs["completed"] + jobs["running_at_end"] + jobs["queued_at_end"] + jobs["rejected"]
        assert jobs["arrived"] == 184 == accounted
        assert jobs["running_at_end"] > 0 and jobs["queued_at_end"] > 0

    def test_a_job_larger_than_its_silo_is_reported_not_dropped(self) -> None:
        trace = Trace("tiny", (job("small", "a", 0, 60, 1), job("huge", "b", 0, 60, 8, members=4)))

        figures = simulate_replay(trace, "best-fit", capacity_gpus=16).as_dict()

        assert figures["jobs"]["rejected"] == 1
        assert "needs 32 GPUs" in next(iter(figures["jobs"]["rejection_reasons"]))

    def test_the_pooled_fleet_absorbs_a_burst_that_waits_in_its_silo(self) -> None:
        # 32 GPUs. A training team runs one 8-GPU job; a search team bursts 24 one-GPU trials at once.
        # Equal GPU-hours, so the silos get 16 GPUs each: 8 trials wait 20 minutes in the Ray silo while
        # the Slurm silo has a whole node idle. One shared pool starts everything at once.
        trials = tuple(job(f"trial-{i}", "search", 0, 1200, 1) for i in range(24))
        trace = Trace("burst", (job("train", "vision", 0, 3600, 8), *trials))

        siloed = simulate_replay(trace, "siloed", capacity_gpus=32).as_dict()
        federated = simulate_replay(trace, "federated", capacity_gpus=32).as_dict()

        assert siloed["pools"]["ray"]["gpus"] == 16
        assert siloed["wait_hours"]["all"]["p95"] == pytest.approx(1 / 3)
        assert federated["wait_hours"]["all"]["p95"] == 0
        assert federated["jct_hours"]["1"]["mean"] < siloed["jct_hours"]["1"]["mean"]


class TestPacking:
    @staticmethod
    def fleet() -> list[Node]:
        return [
            Node(
                name=f"n{i}",
                gpu_total=8 if i % 2 else 2,
                gpu_model="G2" if i % 3 else "T4",
                cpu_milli_total=64000,
                cpu_milli_free=64000,
                memory_mib_total=262144,
                memory_mib_free=262144,
            )
            for i in range(12)
        ]

    @staticmethod
    def pods() -> list[Request]:
        shapes = [(1, 0, 8000), (0, 500, 4000), (2, 0, 16000), (8, 0, 32000), (0, 250, 2000), (0, 0, 4000)]
        return [
            Request(id=f"p{i}", gpus_per_member=g, gpu_milli=m, cpu_milli=c, memory_mib=4096)
            for i, (g, m, c) in enumerate(shapes * 6)
        ]

    @pytest.mark.parametrize("policy", POLICIES)
    def test_allocation_never_falls_as_pods_arrive(self, policy: str) -> None:
        result = run_packing(self.fleet(), self.pods(), policy=policy, seed=42)
        values = [v for v in result.allocation_pct if v is not None]

        assert len(values) > 20
        assert values == sorted(values)
        assert all(v <= k + 1 for k, v in enumerate(result.allocation_pct) if v is not None)

    def test_inflation_reaches_the_target_without_overshooting(self) -> None:
        pods = self.pods()
        capacity = sum(node.gpu_total for node in self.fleet()) * 1000

        workload = inflate_and_shuffle(pods, capacity, seed=3)
        total = sum((p.gpu_milli or p.gpus_per_member * 1000) for p in workload)

        assert 1.3 * capacity - 8000 < total <= 1.3 * capacity
        assert len({p.id for p in workload}) == len(workload)

    def test_a_packing_run_is_reproducible_for_a_seed_and_differs_across_seeds(self) -> None:
        runs = [run_packing(self.fleet(), self.pods(), policy="random", seed=s) for s in (1, 1, 2)]

        assert runs[0].allocation_pct == runs[1].allocation_pct
        assert runs[0].allocation_pct != runs[2].allocation_pct


def test_percentiles_interpolate_like_numpy() -> None:
    assert percentile([1, 2, 3, 4], 50) == 2.5
    assert percentile([0, 10], 95) == pytest.approx(9.5)
    assert percentile([], 50) is None


@pytest.mark.parametrize("policy", ["k8s-best-fit", "k8s-fgd", "fgd-cpu", "fgd-strand"])
def test_the_kube_policies_place_cpu_only_pods_themselves_and_account_for_their_cpu(policy, monkeypatch) -> None:
    def refuse(*_args, **_kwargs):
        raise AssertionError("the simulator's CPU-only rule was asked, not the kube policy")

    monkeypatch.setattr(CpuOnlyPlacer, "place", refuse)
    node = Node(
        name="n0",
        gpu_total=8,
        gpu_model="G2",
        cpu_milli_total=4000,
        cpu_milli_free=4000,
        memory_mib_total=65536,
        memory_mib_free=65536,
    )
    # Every pod asks 1 CPU of the node's 4 and GPUs never run out (at most 4 one-GPU pods fit by CPU), so
    # the first four arrivals place, CPU-only or not, and every later one fails for want of CPU.
    pods = [
        Request(id="cpu", gpus_per_member=0, cpu_milli=1000, memory_mib=1024),
        Request(id="gpu", gpus_per_member=1, cpu_milli=1000, memory_mib=1024),
    ]
    arrivals = inflate_and_shuffle(pods, 8 * MILLI_PER_GPU, seed=42)
    result = run_packing([node], pods, policy=policy, seed=42, verify=False)
    assert any(pod.gpus == 0 for pod in arrivals[:4]), "the seed should put a CPU-only pod among the placed"
    assert result.pods_placed == 4
    assert result.failures_by_size == dict(sorted(Counter(f"{pod.gpus:g}" for pod in arrivals[4:]).items()))
