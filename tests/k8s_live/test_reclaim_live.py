"""Issue 31, "keep the guarantee", on the real kube-apiserver + kube-scheduler: recsys (no guarantee) takes the
last free GPUs, nlp (guaranteed as many) pends Unschedulable; one collect round and one reclaim round (auto) later
the portal has evicted recsys's pod through the Eviction API and the real scheduler has bound nlp's pod. A
PodDisruptionBudget covering the borrower holds: the eviction is refused and reported, nothing is deleted.

The fixture has no kubelets, so an evicted pod would stay Terminating for ever: the orchestrator's
``reclaim.eviction_grace_s`` is 0 here (a real cluster keeps each pod's own termination grace)."""

from __future__ import annotations

from decimal import Decimal

import pytest
from kubernetes.client import PolicyV1Api
from kubernetes.client.exceptions import ApiException

from scheduling.models import Orchestrator, Queue, ReclaimPlan, Team, Workload
from scheduling.services.collection import scrape
from scheduling.services.reclaim import reclaim_round

from .conftest import effective_gpus, live_gpu_pods, seed, wait_for

pytestmark = pytest.mark.live

TEAMS = ("nlp", "recsys")


def free_gpus_by_node(core) -> dict[str, int]:
    nodes = [n for n in core.list_node().items if not n.spec.unschedulable]
    held: dict[str, int] = {}
    for pod in live_gpu_pods(core):
        if pod.spec.node_name:
            held[pod.spec.node_name] = held.get(pod.spec.node_name, 0) + effective_gpus(pod)
    free = {n.metadata.name: int(n.status.allocatable["nvidia.com/gpu"]) - held.get(n.metadata.name, 0) for n in nodes}
    return {name: gpus for name, gpus in free.items() if gpus > 0}


def unschedulable(core, ns: str, name: str) -> bool:
    condition = seed.scheduled_condition(core, ns, name)
    return condition is not None and condition.reason == "Unschedulable"


@pytest.fixture
def borrowed(cluster, transactional_db, django_user_model):
    """recsys fills every free GPU (one pod per node with room), nlp waits for as many GPUs as recsys's
    largest pod; both teams in the portal, nlp guaranteed that many; cleaned up afterwards."""
    core = cluster.core
    for ns in TEAMS:
        core.create_namespace({"metadata": {"name": ns}})
    try:
        free = free_gpus_by_node(core)
        assert free, "the seeded cluster has no free GPU left to borrow"
        for index, gpus in enumerate(sorted(free.values(), reverse=True)):
            name = f"borrow-{index}"
            core.create_namespaced_pod("recsys", seed.pod_body(seed.Pod("recsys", name, gpus, user="rex")))
            wait_for(lambda n=name: seed.bound_node(core, "recsys", n), what=f"recsys/{name} to be bound")
        wanted = max(free.values())
        core.create_namespaced_pod("nlp", seed.pod_body(seed.Pod("nlp", "train", wanted, user="nina")))
        wait_for(lambda: unschedulable(core, "nlp", "train"), what="nlp/train to be Unschedulable")
        admin = django_user_model.objects.create_user("ada", is_staff=True, is_superuser=True)
        for slug, guaranteed in (("nlp", wanted), ("recsys", 0)):
            queue = Queue(team=Team.objects.create(slug=slug, name=slug), weight=Decimal(50),
                          guaranteed=guaranteed, burst_limit=16)
            queue._history_user, queue._change_reason = admin, "test teams"
            queue.save()
        options = {"kubeconfig": cluster.env["K8S_PORTAL_KUBECONFIG"], "volcano": True,
                   "reclaim": {"mode": "auto", "min_runtime_s": 0, "grace_s": 0, "eviction_grace_s": 0}}
        k8s_orch = Orchestrator.objects.create(name="k8s", kind="kubernetes", endpoint="https://127.0.0.1",
                                               options=options)
        yield k8s_orch, wanted
    finally:
        for ns in TEAMS:
            for pod in core.list_namespaced_pod(ns).items:
                core.delete_namespaced_pod(pod.metadata.name, ns, grace_period_seconds=0)
            core.delete_namespace(ns)
        gone = lambda: not {n.metadata.name for n in core.list_namespace().items} & set(TEAMS)  # noqa: E731
        wait_for(gone, timeout=120, what="the namespace controller to delete nlp and recsys")


def collect(orchestrator: Orchestrator) -> None:
    outcome = scrape(orchestrator.pk)
    assert outcome.run is not None and outcome.run.ok, outcome


def test_a_team_below_its_guarantee_gets_its_pod_bound_after_a_borrowers_pod_is_evicted(borrowed, cluster) -> None:
    k8s_orch, wanted = borrowed
    collect(k8s_orch)
    assert Workload.objects.get(orchestrator=k8s_orch, external_id="nlp/pod/train").state == "pending"

    plan = reclaim_round(k8s_orch.pk)

    assert plan is not None and plan.state == ReclaimPlan.State.APPLIED, plan and (plan.state, plan.error)
    [reclaim] = plan.reclaims
    assert reclaim["owner"] == "nlp" and reclaim["cause"].startswith(f"nlp held 0 of its {wanted} guaranteed GPUs")
    [victim] = reclaim["victims"]
    assert victim["team"] == "recsys" and victim["gpus"] == wanted
    assert [(a["verb"], a["changed"]) for a in plan.actions] == [("evict", True)]
    evicted = victim["workload_id"].rsplit("/", 1)[1]
    core = cluster.core
    with pytest.raises(ApiException) as gone:
        core.read_namespaced_pod(evicted, "recsys")
    assert gone.value.status == 404
    node = wait_for(lambda: seed.bound_node(core, "nlp", "train"), what="nlp/train to be bound by kube-scheduler")
    assert node


def test_a_pod_disruption_budget_stops_the_eviction_and_the_plan_says_so(borrowed, cluster) -> None:
    k8s_orch, _wanted = borrowed
    budget = {"metadata": {"name": "keep-recsys", "namespace": "recsys"},
              "spec": {"maxUnavailable": 0, "selector": {"matchLabels": {"user": "rex"}}}}
    # The apiserver refuses an eviction (429) while the budget allows no disruption, or while no controller has
    # observed it yet.
    PolicyV1Api(cluster.admin).create_namespaced_pod_disruption_budget("recsys", budget)
    # A Pending pod is evicted whatever its budget (the apiserver's rule since 1.19): with no kubelet here, say
    # what a kubelet would, that recsys's pods run.
    for pod in cluster.core.list_namespaced_pod("recsys").items:
        cluster.core.patch_namespaced_pod_status(pod.metadata.name, "recsys", {"status": {"phase": "Running"}})
    collect(k8s_orch)

    plan = reclaim_round(k8s_orch.pk)

    assert plan is not None and plan.state == ReclaimPlan.State.APPLIED
    [action] = plan.actions
    assert action["changed"] is False and "PodDisruptionBudget" in action["message"]
    assert all(seed.bound_node(cluster.core, "recsys", p.metadata.name)
               for p in cluster.core.list_namespaced_pod("recsys").items)
    assert unschedulable(cluster.core, "nlp", "train")

