"""The ledger against both live fixtures: the real Slurm 22.05 fleet (scripts/slurm/) and the real
kube-apiserver (scripts/k8s/), scraped by the portal's own collectors through ``collection.scrape`` (which
evaluates the ledger after each scrape). Skips with the fixture's reason where either cannot run (fails in CI).

Fixture fleets: Slurm dgx01-08, Kubernetes dgx01-06 (dgx06 cordoned and tainted by the seed), Ray
ray-head + ray-worker-1/2 (8 GPUs each, scripts/ray/)."""

from __future__ import annotations

import time

import pytest
from django.test import override_settings

from scheduling.collectors.actuators import parse_scontrol_node
from scheduling.models import LedgerFinding, Orchestrator, OwnershipInterval, SourceView
from scheduling.services import collection, ledger

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]
KUBERNETES_NODES = ("dgx01", "dgx02", "dgx03", "dgx04", "dgx05")  # schedulable after the seed
ORPHAN_AFTER_S = 3.0


def _live(kind: str):
    return LedgerFinding.objects.filter(kind=kind, opened_at__isnull=False, closed_at__isnull=True)


@pytest.fixture
def sources(slurm_fleet, cluster, monkeypatch):
    monkeypatch.setenv("GPUPORTAL_SECRET_TEST_JWT", slurm_fleet.token)
    slurm = Orchestrator.objects.create(
        name="slurm-live",
        kind="slurm",
        endpoint=slurm_fleet.url,
        credentials_ref="env:GPUPORTAL_SECRET_TEST_JWT",
        options={"user": slurm_fleet.user},
    )
    k8s = Orchestrator.objects.create(
        name="k8s-live",
        kind="kubernetes",
        endpoint=cluster.env.get("K8S_API_URL", "kubeconfig"),
        options={"kubeconfig": cluster.env["K8S_PORTAL_KUBECONFIG"]},
    )
    # A clean split to start from: Kubernetes keeps dgx05, Slurm everything else.
    for name in KUBERNETES_NODES[:-1]:
        cluster.core.patch_node(name, {"spec": {"unschedulable": True}})
    slurm_fleet.run("scontrol", "update", "nodename=dgx05", "state=drain", "reason=ledger-live:k8s-owns-it")
    try:
        yield slurm, k8s
    finally:
        for name in ("dgx03", "dgx05"):
            slurm_fleet.run("scontrol", "update", f"nodename={name}", "state=resume")
        for name in KUBERNETES_NODES:
            cluster.core.patch_node(name, {"spec": {"unschedulable": None}})


def collection_round(*orchestrators: Orchestrator) -> None:
    for orchestrator in orchestrators:
        outcome = collection.scrape(orchestrator.pk)
        assert outcome.run is not None and outcome.run.ok, (outcome, outcome.run and outcome.run.error)


@override_settings(GPUPORTAL_LEDGER={"orphan_after_s": ORPHAN_AFTER_S})
def test_a_node_schedulable_in_slurm_and_kubernetes_is_caught_in_one_round_and_cleared_by_a_slurm_drain(
    sources,
    slurm_fleet,
    cluster,
):
    slurm, k8s = sources
    collection_round(slurm, k8s)
    adopted = {h.name for h in ledger.adopt_hosts(reason="live fixture inventory")}
    assert adopted == {f"dgx{i:02d}" for i in range(1, 9)}
    collection_round(slurm, k8s)
    assert LedgerFinding.objects.filter(kind="unknown_node", closed_at__isnull=True).count() == 0  # adopted
    assert _live("double_ownership").count() == 0, list(_live("double_ownership").values_list("explanation"))
    assert set(OwnershipInterval.objects.filter(ended_at__isnull=True).values_list("node", "orchestrator__name")) == {
        *((f"dgx{i:02d}", "slurm-live") for i in (1, 2, 3, 4, 6, 7, 8)),
        ("dgx05", "k8s-live"),
    }

    cluster.core.patch_node("dgx03", {"spec": {"unschedulable": None}})  # now schedulable in both
    collection_round(slurm, k8s)
    double = _live("double_ownership").get()
    assert double.node == "dgx03" and double.orchestrators == "k8s-live,slurm-live"
    assert "schedulable in 2 orchestrators" in double.explanation

    slurm_fleet.run("scontrol", "update", "nodename=dgx03", "state=drain", "reason=ledger-live:release")
    collection_round(slurm, k8s)
    assert _live("double_ownership").count() == 0
    closed = LedgerFinding.objects.get(kind="double_ownership")
    assert closed.closed_at is not None and closed.node == "dgx03"

    cluster.core.patch_node("dgx03", {"spec": {"unschedulable": True}})  # drained everywhere now
    collection_round(slurm, k8s)
    assert _live("orphan").count() == 0  # not before the setting
    time.sleep(ORPHAN_AFTER_S + 0.5)
    collection_round(slurm, k8s)
    orphan = _live("orphan").get()
    assert orphan.node == "dgx03"
    assert "ledger-live:release" in orphan.explanation and "cordoned" in orphan.explanation
    others = LedgerFinding.objects.exclude(kind__in=("double_ownership", "orphan")).filter(
        opened_at__isnull=False, closed_at__isnull=True
    )
    assert list(others.values_list("kind", "node", "explanation")) == []


def responding(slurm_fleet, *names: str, timeout: float = 120.0) -> None:
    """Wait for slurmd to answer: while Ray's fixture starts, the loaded machine can make slurmctld flag a
    node NOT_RESPONDING, and such a node is rightly not schedulable (that would be a true orphan)."""
    deadline = time.monotonic() + timeout
    for name in names:
        while "NOT_RESPONDING" in parse_scontrol_node(slurm_fleet.run("scontrol", "show", "node", name, "-o"))[1]:
            assert time.monotonic() < deadline, f"slurmd of {name} did not answer within {timeout:.0f} s"
            time.sleep(2)


RAY_ALIASES = {"ray-head": "dgx06", "ray-worker-1": "dgx07", "ray-worker-2": "dgx08"}


def test_ray_nodes_join_their_hosts_through_aliases_and_a_resumed_slurm_node_is_caught_owned_twice(
    slurm_fleet,
    ray_cluster,
    monkeypatch,
):
    from scheduling.models import FleetHost, NodeAlias

    monkeypatch.setenv("GPUPORTAL_SECRET_TEST_JWT", slurm_fleet.token)
    slurm = Orchestrator.objects.create(
        name="slurm-live",
        kind="slurm",
        endpoint=slurm_fleet.url,
        credentials_ref="env:GPUPORTAL_SECRET_TEST_JWT",
        options={"user": slurm_fleet.user},
    )
    ray = Orchestrator.objects.create(name="ray-live", kind="ray", endpoint=ray_cluster.url)
    hosts = {f"dgx{i:02d}": FleetHost.objects.create(name=f"dgx{i:02d}", gpu_total=8) for i in range(1, 9)}
    for name, host in RAY_ALIASES.items():  # Ray names its nodes itself; the admin maps them to hosts
        NodeAlias.objects.create(orchestrator=ray, name=name, host=hosts[host])
    for host in RAY_ALIASES.values():  # handed to Ray: drained in Slurm
        slurm_fleet.run("scontrol", "update", f"nodename={host}", "state=drain", "reason=ledger-live:ray-owns-it")
    try:
        responding(slurm_fleet, *(f"dgx{i:02d}" for i in range(1, 9)))
        collection_round(slurm, ray)
        opened = LedgerFinding.objects.filter(opened_at__isnull=False, closed_at__isnull=True)
        assert list(opened.values_list("kind", "node", "explanation")) == []
        ray_owns = OwnershipInterval.objects.filter(orchestrator=ray, ended_at__isnull=True)
        assert set(ray_owns.values_list("node", flat=True)) == set(RAY_ALIASES.values())

        slurm_fleet.run("scontrol", "update", "nodename=dgx07", "state=resume")
        responding(slurm_fleet, "dgx07")
        collection_round(slurm, ray)
        views = SourceView.objects.filter(name__in=("dgx07", "ray-worker-1"))
        assert _live("double_ownership").count() == 1, list(views.values_list("name", "schedulable", "why_not"))
        double = _live("double_ownership").get()
        assert double.node == "dgx07" and double.orchestrators == "ray-live,slurm-live"

        slurm_fleet.run("scontrol", "update", "nodename=dgx07", "state=drain", "reason=ledger-live:back-to-ray")
        collection_round(slurm, ray)
        assert _live("double_ownership").count() == 0
    finally:
        for host in RAY_ALIASES.values():
            slurm_fleet.run("scontrol", "update", f"nodename={host}", "state=resume")
