"""A small demo-style federation (demo:// endpoints: the database is the orchestrator) for rebalancer tests."""

from datetime import UTC, datetime, time, timedelta

import pytest

from scheduling.models import Node, Orchestrator, PoolPolicy, Workload

MONDAY_9 = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)  # a Monday, 09:00 UTC (tests run with TIME_ZONE=UTC)


@pytest.fixture
def federation(db):
    """slurm-hpc 6 nodes, k8s-serving 1 node, ray-sweeps 1 node; 8 GPUs each."""
    orchs = {
        name: Orchestrator.objects.create(name=name, kind=kind, endpoint=f"demo://{name}")
        for name, kind in (("slurm-hpc", "slurm"), ("k8s-serving", "kubernetes"), ("ray-sweeps", "ray"))
    }
    counts = {"slurm-hpc": 6, "k8s-serving": 1, "ray-sweeps": 1}
    nodes = {}
    for name, count in counts.items():
        for i in range(count):
            node_name = f"{name.split('-')[0]}{i}"
            nodes[node_name] = Node.objects.create(orchestrator=orchs[name], name=node_name, gpu_model="H100",
                                                   gpu_total=8)
    return {"orchs": orchs, "nodes": nodes}


@pytest.fixture
def inference_floor(federation):
    return PoolPolicy.objects.create(
        orchestrator=federation["orchs"]["k8s-serving"], name="inference business hours", weekdays=[1, 2, 3, 4, 5],
        start_time=time(8), end_time=time(20), floor_gpus=24, precedence=10,
    )


def run_on(node: Node, gpus: int, orchestrator: Orchestrator, job: str = "job", gang: int = 1) -> Workload:
    Node.objects.filter(pk=node.pk).update(gpu_allocated=min(gpus, node.gpu_total), state=Node.State.MIXED)
    return Workload.objects.create(
        orchestrator=orchestrator, external_id=job, gang_size=gang, gpus_per_member=gpus // gang or gpus,
        state=Workload.State.RUNNING, submitted_at=MONDAY_9 - timedelta(hours=2),
        started_at=MONDAY_9 - timedelta(hours=1), nodes=[{"node": node.name, "gpus": list(range(gpus))}],
    )
