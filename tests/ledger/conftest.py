"""Two real-looking sources fed through the real ingest path (Snapshot -> ingest_snapshot -> SourceView)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest

from scheduling.collectors.snapshot import ObservedNode, ObservedWorkload, Snapshot, Taint, WorkloadState
from scheduling.engine.types import OrchestratorKind
from scheduling.models import FleetHost, Orchestrator
from scheduling.services import ledger
from scheduling.services.ingest import ingest_snapshot
from tests.api.conftest import api  # noqa: F401 - the role clients with knox tokens

T0 = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
NAMES = ("dgx01", "dgx02", "dgx03", "dgx04")


def slurm_node(name: str, drained: bool = False, **extra) -> ObservedNode:
    flags = ("DRAIN",) if drained else ()
    return ObservedNode(
        name=name,
        orchestrator="slurm-hpc",
        gpu_total=extra.pop("gpu_total", 8),
        gpu_model="H100",
        state="drained" if drained else "idle",
        state_flags=flags,
        reason="maintenance" if drained else "",
        cordoned=drained,
        partitions=("gpu",),
        schedulable=not drained,
        **extra,
    )


def k8s_node(name: str, cordoned: bool = False, **extra) -> ObservedNode:
    taints = (Taint("gpuportal.io/rebalance", "draining"),) if cordoned else ()
    return ObservedNode(
        name=name,
        orchestrator="k8s-serving",
        gpu_total=extra.pop("gpu_total", 8),
        gpu_model="H100",
        state="ready",
        state_flags=("cordoned",) if cordoned else (),
        taints=taints,
        cordoned=cordoned,
        schedulable=not cordoned,
        **extra,
    )


class Fleet:
    """Slurm owns dgx01-02, Kubernetes dgx03-04; the other side lists each node drained / cordoned."""

    def __init__(self) -> None:
        self.slurm = Orchestrator.objects.create(name="slurm-hpc", kind="slurm", endpoint="http://127.0.0.1:1")
        self.k8s = Orchestrator.objects.create(name="k8s-serving", kind="kubernetes", endpoint="https://127.0.0.1:2")
        for name in NAMES:
            FleetHost.objects.create(name=name, gpu_model="H100", gpu_total=8)
        self.slurm_owns = {"dgx01", "dgx02"}
        self.k8s_owns = {"dgx03", "dgx04"}

    def scrape_slurm(self, at: datetime, workloads: tuple[ObservedWorkload, ...] = (), **node_extra) -> None:
        nodes = tuple(slurm_node(n, drained=n not in self.slurm_owns, **node_extra.get(n, {})) for n in NAMES)
        ingest_snapshot(self.slurm, Snapshot("slurm-hpc", OrchestratorKind.SLURM, at, nodes, workloads))

    def scrape_k8s(self, at: datetime, **node_extra) -> None:
        nodes = tuple(k8s_node(n, cordoned=n not in self.k8s_owns, **node_extra.get(n, {})) for n in NAMES)
        ingest_snapshot(self.k8s, Snapshot("k8s-serving", OrchestratorKind.KUBERNETES, at, nodes, ()))

    def round(self, at: datetime, **slurm_extra) -> ledger.LedgerOutcome:
        """A collection round: both scrapes, then the ledger (as collection.scrape does after each)."""
        self.scrape_slurm(at, **slurm_extra)
        self.scrape_k8s(at)
        return ledger.evaluate(at)


@pytest.fixture
def two_sources(db) -> Fleet:
    return Fleet()


@pytest.fixture
def rounds(two_sources) -> Callable[[int], datetime]:
    """The moment of round ``n`` (30 s apart)."""
    return lambda n: T0 + timedelta(seconds=30 * n)


def running(external_id: str, node: str, gpus: int) -> ObservedWorkload:
    return ObservedWorkload(
        external_id=external_id,
        orchestrator="slurm-hpc",
        team="nlp",
        state=WorkloadState.RUNNING,
        gpus_per_member=gpus,
        nodes=(node,),
        started_at=T0.timestamp(),
    )
