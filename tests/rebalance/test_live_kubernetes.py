"""Slurm -> Kubernetes against both live fixtures: the real Slurm fleet drains two nodes (scontrol DRAIN)
and the real kube-apiserver (scripts/k8s/start.sh, the portal's own RBAC user) labels, untaints and
uncordons the same two nodes. Skips with the fixture's reason where either cannot run (fails in CI)."""

from __future__ import annotations

import time

import pytest

from scheduling.collectors import verbs
from scheduling.collectors.actuators import parse_scontrol_node
from scheduling.models import Node, Orchestrator, PoolPolicy, RebalancePlan
from scheduling.services import collection, rebalance

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]
IN_BOTH = ("dgx01", "dgx02", "dgx03", "dgx04", "dgx05", "dgx06")  # node names the two fixtures share


def test_a_plan_drains_two_nodes_in_slurm_and_labels_and_uncordons_them_in_kubernetes(
    slurm_fleet, cluster, monkeypatch, django_user_model
):
    monkeypatch.setenv("GPUPORTAL_SECRET_TEST_JWT", slurm_fleet.token)
    slurm = Orchestrator.objects.create(
        name="slurm-live", kind="slurm", endpoint=slurm_fleet.url, credentials_ref="env:GPUPORTAL_SECRET_TEST_JWT",
        options={"user": slurm_fleet.user,
                 "rebalance": {"dry_run": False, "slurm_conf": slurm_fleet.env["SLURM_CONF"]}},
    )
    k8s = Orchestrator.objects.create(
        name="k8s-live", kind="kubernetes", endpoint=cluster.env.get("K8S_API_URL", "kubeconfig"),
        options={"kubeconfig": cluster.env["K8S_PORTAL_KUBECONFIG"], "rebalance": {"dry_run": False}},
    )
    assert collection.scrape(slurm.pk).run.ok
    Node.objects.exclude(name__in=IN_BOTH).update(pinned=True)
    PoolPolicy.objects.create(orchestrator=k8s, name="inference floor", weekdays=list(range(1, 8)),
                              start_time="00:00", end_time="00:00", floor_gpus=16)
    admin = django_user_model.objects.create_user("ada", password="pw", is_staff=True, is_superuser=True)
    plan = rebalance.propose_plan().plan
    names = list(plan.moves.values_list("node__name", flat=True))
    assert len(names) == 2
    for name in names:  # while Slurm owns them, Kubernetes must not schedule there
        cluster.core.patch_node(name, {"spec": {"unschedulable": True}})
    try:
        rebalance.approve_plan(plan, by=admin, reason="live: inference floor")
        deadline, outcome = time.monotonic() + 90, None
        while time.monotonic() < deadline:
            outcome = rebalance.apply_step(plan.pk)
            if outcome.finished:
                break
            time.sleep(1)
        assert outcome is not None and outcome.plan_state == RebalancePlan.State.APPLIED, outcome
        for name in names:
            _base, flags, _reason = parse_scontrol_node(slurm_fleet.run("scontrol", "show", "node", name, "-o"))
            assert "DRAIN" in flags
            live = cluster.core.read_node(name)
            assert not live.spec.unschedulable
            assert live.metadata.labels.get(verbs.POOL_LABEL) == "k8s-live"
            assert verbs.DRAIN_TAINT not in {t.key for t in live.spec.taints or ()}
    finally:
        for name in names:
            slurm_fleet.run("scontrol", "update", f"nodename={name}", "state=resume")
            cluster.core.patch_node(name, {"metadata": {"labels": {verbs.POOL_LABEL: None}},
                                           "spec": {"unschedulable": None}})
