"""The engine types cached across processes pickle as their fields and come back equal and still frozen."""

from __future__ import annotations

import dataclasses
import pickle

import pytest

from scheduling.engine.types import MemberAssignment, Node, Request, RunningWorkload, TopologyLevel, WorkloadKind

SAMPLES = [
    Node("n1", 8, "H100", (0, 500, 1000, 1000, 1000, 1000, 1000, 1000), cpu_milli_total=64_000,
         cpu_milli_free=1_000, memory_mib_total=512, memory_mib_free=10, nvlink_domain="d", leaf_switch="l",
         spine="s", schedulable=False),
    Request("r", members=2, gpus_per_member=4, gpu_models=frozenset({"H100", "A100"}), cpu_milli=8,
            memory_mib=9, topology=TopologyLevel.LEAF_SWITCH, topology_required=True, team="t", priority=3,
            kind=WorkloadKind.INFERENCE, duration_estimate_s=60.5, submitted_at=1.25, orchestrator="slurm",
            latency_sla_ms=20.0),
    MemberAssignment(1, "n1", (2, 3)),
    RunningWorkload("w", "t", 4.0, (MemberAssignment(0, "n1", (0, 1, 2, 3)),), priority=2, expected_end=99.0),
]


@pytest.mark.parametrize("sample", SAMPLES, ids=lambda s: type(s).__name__)
def test_a_pickled_engine_object_comes_back_equal_and_frozen(sample) -> None:
    again = pickle.loads(pickle.dumps(sample))
    assert again == sample and hash(again) == hash(sample)
    assert [getattr(again, f.name) for f in dataclasses.fields(again)] == \
        [getattr(sample, f.name) for f in dataclasses.fields(sample)]
    with pytest.raises(dataclasses.FrozenInstanceError):
        again.__setattr__(dataclasses.fields(again)[0].name, None)
