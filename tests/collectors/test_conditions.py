"""Node conditions: each collector reads its orchestrator's words into one NodeCondition, checked on the
shared samples (skipped with a reason when ../shared is absent) and against ``condition_of``, the reading
ingest applied to the raw states before the collectors set a condition (so stored node states are unchanged).
"""

from __future__ import annotations

import copy
from dataclasses import replace

import pytest

from scheduling.collectors import conditions
from scheduling.collectors import k8s as k8s_collector
from scheduling.collectors import ray as ray_collector
from scheduling.collectors.slurm import parse_node
from scheduling.collectors.snapshot import NodeCondition, ObservedNode

from .conftest import load_fixture, load_shared
from .test_ray_parsing import _documents

C = NodeCondition


def _agrees_with_the_raw_reading(node: ObservedNode) -> None:
    assert node.condition is not None, node.name
    assert conditions.condition_of(replace(node, condition=None)) is node.condition, node.name


# --------------------------------------------------------------------------------------------- Slurm


# sinfo_N_l.txt says: dgx01/03 mixed, dgx02 draining, dgx04-06 planned, dgx07 down, dgx08 drained.
SLURM_SAMPLE = {
    "dgx01": C.READY,
    "dgx02": C.DRAINING,
    "dgx03": C.READY,
    "dgx04": C.READY,
    "dgx05": C.READY,
    "dgx06": C.READY,
    "dgx07": C.DOWN,
    "dgx08": C.DRAINED,
}


@pytest.mark.parametrize("version", ["v0.0.36", "v0.0.37", "v0.0.38"])
def test_shared_slurm_nodes_read_as_sinfo_shows_them_in_every_api_version(version):
    nodes = [parse_node(raw, orchestrator="s") for raw in load_shared("slurm", f"{version}_nodes.json")["nodes"]]
    assert {n.name: n.condition for n in nodes} == SLURM_SAMPLE
    for node in nodes:
        _agrees_with_the_raw_reading(node)


def test_shared_slurm_sinfo_words_match_the_conditions():
    words = {"mixed": C.READY, "planned": C.READY, "draining": C.DRAINING, "drained": C.DRAINED, "down": C.DOWN}
    nodes = {n["name"]: parse_node(n, orchestrator="s") for n in load_shared("slurm", "v0.0.38_nodes.json")["nodes"]}
    from .conftest import shared_dir

    for line in (shared_dir("slurm") / "sinfo_N_l.txt").read_text().splitlines()[2:]:
        name, _count, _partition, state = line.split()[:4]
        assert nodes[name].condition is words[state], line


def test_shared_planned_nodes_are_held_for_a_pending_gang():
    nodes = {n["name"]: parse_node(n, orchestrator="s") for n in load_shared("slurm", "v0.0.38_nodes.json")["nodes"]}
    assert {name for name, n in nodes.items() if conditions.is_planned(n)} == {
        "dgx04",
        "dgx05",
        "dgx06",
        "dgx07",
        "dgx08",
    }


@pytest.mark.parametrize(
    ("base", "flags", "allocated", "expected"),
    [
        ("idle", (), 0, C.READY),
        ("allocated", (), 8, C.READY),
        ("mixed", ("DRAIN",), 4, C.DRAINING),
        ("idle", ("DRAIN",), 0, C.DRAINED),
        ("down", ("DRAIN",), 0, C.DOWN),
        ("idle", ("NOT_RESPONDING",), 0, C.DOWN),
        ("mixed", ("FAIL",), 2, C.DOWN),
        ("idle", ("MAINT",), 0, C.DRAINED),
        ("idle", ("POWERED_DOWN",), 0, C.DRAINED),
        ("unknown", (), 0, C.UNKNOWN),
        ("future", (), 0, C.DRAINED),
    ],
)
def test_slurm_states_and_flags(base, flags, allocated, expected):
    assert conditions.slurm_condition(base, flags, allocated) is expected


def test_the_slurm_verbs_read_a_drain_as_scontrol_reports_it():
    assert conditions.slurm_drained("idle", {"DRAIN"}) and conditions.slurm_drained("down", {"DRAIN"})
    assert not conditions.slurm_drained("mixed", {"DRAIN"}) and not conditions.slurm_drained("idle", set())
    assert conditions.slurm_drain_requested({"DRAIN", "PLANNED"}) and not conditions.slurm_drain_requested({"PLANNED"})


# ---------------------------------------------------------------------------------------- Kubernetes


def test_shared_kubernetes_nodes_are_ready_and_the_cordoned_one_takes_no_work():
    snapshot = k8s_collector.build_snapshot(
        "k",
        nodes=[*load_shared("k8s", "nodelist.json")["items"], load_shared("k8s", "node_dgx08_cordoned_tainted.json")],
        pods=[],
    )
    cordoned = [n for n in snapshot.nodes if n.cordoned]
    assert cordoned and all(n.condition is C.DRAINED for n in cordoned)
    assert all(n.condition is C.READY for n in snapshot.nodes if not n.cordoned)
    for node in snapshot.nodes:
        _agrees_with_the_raw_reading(node)


def _with_ready(raw: dict, status: str | None) -> dict:
    raw = copy.deepcopy(raw)
    kept = [c for c in raw["status"]["conditions"] if c["type"] != "Ready"]
    if status is not None:
        kept.append({"type": "Ready", "status": status, "reason": "KubeletNotReady", "message": "PLEG is not healthy"})
    raw["status"]["conditions"] = kept
    return raw


@pytest.mark.parametrize(("status", "expected"), [("True", C.READY), ("False", C.NOT_READY), (None, C.UNKNOWN)])
def test_the_ready_condition_decides_a_kubernetes_node(status, expected):
    raw = _with_ready(load_fixture("k8s", "nodelist.json")["items"][0], status)
    node = k8s_collector.parse_node(raw, 0, orchestrator="k")
    assert node.condition is expected
    _agrees_with_the_raw_reading(node)


# ----------------------------------------------------------------------------------------------- Ray


def test_shared_ray_nodes_alive_are_ready():
    snapshot = ray_collector.build_snapshot("r", **_documents(nodes_doc=load_shared("ray", "api_v0_nodes.json")))
    assert snapshot.nodes and all(n.condition is C.READY for n in snapshot.nodes)
    for node in snapshot.nodes:
        _agrees_with_the_raw_reading(node)


def test_a_dead_ray_node_is_read_as_drained_as_it_was_always_stored():
    assert conditions.ray_condition("DEAD", 0) is C.DRAINED
    assert conditions.ray_condition("ALIVE", 0) is C.READY


# ------------------------------------------------------------------------------------- hand-built nodes


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        ({}, C.READY),
        ({"state": "DOWN"}, C.DOWN),
        ({"state": "notready"}, C.NOT_READY),
        ({"state": "MIXED", "state_flags": ("DRAIN",), "gpu_allocated": 2}, C.DRAINING),
        ({"cordoned": True}, C.DRAINED),
        ({"schedulable": False, "gpu_allocated": 1}, C.DRAINING),
    ],
)
def test_a_node_built_without_a_condition_is_read_from_its_states(extra, expected):
    node = ObservedNode(**{"name": "n", "orchestrator": "o", "gpu_total": 8, **extra})
    assert conditions.condition_of(node) is expected
    assert conditions.takes_work(node) is (expected is C.READY)
