"""Issue 32 item 3 and issue 31's Kueue part, on a real Kueue v0.17 admitting real batch/v1 Jobs.

One governance round of the portal (the ``governance`` command, as the beat runs it) writes the teams'
ClusterQueues and LocalQueues through the portal's own RBAC role; Kueue admits the Jobs submitted to them, the
job controller makes the pods, kube-scheduler binds them and KWOK runs them. The pool is 32 GPUs; nlp is
guaranteed 8 (cap 24), vision 16 (cap 16), so 8 GPUs are guaranteed to no team: they sit in the cohort's lender
ClusterQueue, which is what lets a team borrow them. With the orchestrator's reclaim mode ``native`` the queues
carry ``reclaimWithinCohort: Any``, and when vision's demand arrives Kueue itself evicts nlp's borrowed work.
"""

from __future__ import annotations

from decimal import Decimal

import pytest
from kubernetes.client.exceptions import ApiException

from scheduling.engine.governance_types import kueue_lender_name
from scheduling.models import AppliedObject, Orchestrator, Queue, Team
from scheduling.services.collection import scrape
from tests.k8s_live.conftest import wait_for
from tests.support import governance_round

from .conftest import FLAVOR, GPUS_PER_NODE, KUEUE, NODES

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]

GPU = "nvidia.com/gpu"
POOL = NODES * GPUS_PER_NODE  # 32
TEAMS = {"nlp": (8, 24), "vision": (16, 16)}  # slug -> (guaranteed, burst limit = cap)
LENDER = kueue_lender_name("gpuportal")
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"


@pytest.fixture
def governed(kueue_cluster, django_user_model):
    """The two teams and the Kubernetes orchestrator (reclaim mode native, governance auto), its nodes collected
    and one governance round run; the teams' namespaces (and so their Jobs and Workloads) deleted afterwards."""
    admin = django_user_model.objects.create_user("ada", is_staff=True, is_superuser=True)
    for slug, (guaranteed, burst) in TEAMS.items():
        queue = Queue(team=Team.objects.create(slug=slug, name=slug), weight=Decimal(50), guaranteed=guaranteed,
                      burst_limit=burst)
        queue._history_user, queue._change_reason = admin, "test teams"
        queue.save()
    options = {
        "kubeconfig": kueue_cluster.portal_kubeconfig, "volcano": False,
        "governance": {"mode": "auto"},
        "reclaim": {"mode": "native", "min_runtime_s": 0, "grace_s": 0},
    }
    orchestrator = Orchestrator.objects.create(name="k8s", kind="kubernetes", endpoint="https://127.0.0.1",
                                               options=options)
    outcome = scrape(orchestrator.pk)
    assert outcome.run is not None and outcome.run.ok, outcome
    report = governance_round()["k8s"]
    assert report["failed"] == 0 and not report["error"], report
    try:
        yield kueue_cluster, report
    finally:
        core = kueue_cluster.core
        for ns in TEAMS:
            try:
                core.delete_namespace(ns)
            except ApiException as error:
                if error.status != 404:
                    raise
        gone = lambda: not {n.metadata.name for n in core.list_namespace().items} & set(TEAMS)  # noqa: E731
        wait_for(gone, timeout=120, what="the namespace controller to empty and delete the teams' namespaces")


def job(name: str, gpus: int, queue: str) -> dict:
    """A one-pod Job submitted to a LocalQueue; it runs until evicted (no gpuportal.io/runtime for KWOK)."""
    resources = {"requests": {GPU: str(gpus)}, "limits": {GPU: str(gpus)}}
    container = {"name": "main", "image": "registry.invalid/gpuportal/train:1", "resources": resources}
    return {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "labels": {QUEUE_LABEL: queue}},
        "spec": {"parallelism": 1, "completions": 1, "backoffLimit": 0, "template": {"spec": {
            "restartPolicy": "Never", "terminationGracePeriodSeconds": 0, "containers": [container]}}},
    }


def submit(cluster, ns: str, name: str, gpus: int) -> None:
    cluster.batch.create_namespaced_job(ns, job(name, gpus, ns))


def workload_of(cluster, ns: str, job_name: str) -> dict | None:
    """Kueue's Workload for a Job (it names it job-<name>-<hash> and owns it by the Job)."""
    for workload in cluster.custom.list_namespaced_custom_object(*KUEUE, ns, "workloads")["items"]:
        if any(ref.get("name") == job_name for ref in workload["metadata"].get("ownerReferences") or ()):
            return workload
    return None


def condition(workload: dict | None, kind: str) -> dict | None:
    for cond in ((workload or {}).get("status") or {}).get("conditions") or ():
        if cond["type"] == kind and cond["status"] == "True":
            return cond
    return None


def admitted(cluster, ns: str, job_name: str) -> bool:
    return condition(workload_of(cluster, ns, job_name), "Admitted") is not None


def running_gpus(cluster, ns: str) -> int:
    """GPUs of the namespace's pods KWOK runs on a node: what the Jobs really hold."""
    pods = cluster.core.list_namespaced_pod(ns).items
    return sum(
        int(pod.spec.containers[0].resources.requests[GPU])
        for pod in pods
        if pod.spec.node_name and pod.status.phase == "Running" and not pod.metadata.deletion_timestamp
    )


def cluster_queue(cluster, name: str) -> dict:
    return cluster.custom.get_cluster_custom_object(*KUEUE, "clusterqueues", name)


def gpu_quota(queue: dict) -> dict:
    [group] = queue["spec"]["resourceGroups"]
    [flavor] = group["flavors"]
    [resource] = flavor["resources"]
    assert (flavor["name"], resource["name"]) == (FLAVOR, GPU)
    return resource


def usage(cluster, name: str) -> tuple[int, int]:
    """(GPUs in use, of which borrowed) as the ClusterQueue's status reports them."""
    for flavor in (cluster_queue(cluster, name).get("status") or {}).get("flavorsUsage") or ():
        for resource in flavor["resources"]:
            if resource["name"] == GPU:
                return int(resource.get("total", 0)), int(resource.get("borrowed", 0))
    return 0, 0


def wait_active(cluster, name: str) -> None:
    """Kueue reports the queue Active (its flavor exists, its spec is valid); else fail with what it says."""
    try:
        wait_for(lambda: condition(cluster_queue(cluster, name), "Active"), what=f"ClusterQueue {name} Active")
    except TimeoutError:
        errors = [line for line in (cluster.state / "log" / "kueue.log").read_text().splitlines() if "rror" in line]
        pytest.fail(f"Kueue did not activate ClusterQueue {name}: {cluster_queue(cluster, name).get('status')}; "
                    f"its log's last errors: {errors[-5:]}")


def test_governance_writes_queues_kueue_accepts_and_its_jobs_are_admitted_and_run(governed) -> None:
    cluster, report = governed
    # Read back as Kueue stores them (v1beta2, through its conversion webhook from the portal's v1beta1).
    for slug, (guaranteed, cap) in TEAMS.items():
        queue = cluster_queue(cluster, slug)
        assert queue["spec"]["cohortName"] == "gpuportal"
        assert gpu_quota(queue)["nominalQuota"] in (guaranteed, str(guaranteed))
        assert int(gpu_quota(queue)["borrowingLimit"]) == cap - guaranteed
        assert queue["spec"]["preemption"]["reclaimWithinCohort"] == "Any"
        wait_active(cluster, slug)
        local = cluster.custom.get_namespaced_custom_object(*KUEUE, slug, "localqueues", slug)
        assert local["spec"]["clusterQueue"] == slug
    ids = [f"kueue_cluster_queue:{name}" for name in (*TEAMS, LENDER)] + [f"kueue_local_queue:{s}/{s}" for s in TEAMS]
    assert set(ids) <= set(report["objects"]["applied"]), report
    # A second round reads every object back as written: enforced, nothing to change or to report.
    again = governance_round()["k8s"]
    assert (again["applied"], again["failed"], again["drifted"], again["error"]) == (0, 0, 0, ""), again
    lender = AppliedObject.objects.get(object_id=f"kueue_cluster_queue:{LENDER}")
    assert lender.team == "" and lender.settings["nominal_gpus"] == POOL - 24  # no team's: the pool's remainder

    submit(cluster, "nlp", "train-0", 8)
    wait_for(lambda: admitted(cluster, "nlp", "train-0"), what="Kueue to admit nlp/train-0")
    wait_for(lambda: running_gpus(cluster, "nlp") == 8, what="nlp/train-0's pod to run on a KWOK node")
    wait_for(lambda: usage(cluster, "nlp") == (8, 0), what="ClusterQueue nlp to report 8 GPUs in use, none borrowed")


def test_a_team_borrows_to_its_cap_and_kueue_reclaims_for_the_owner_in_native_mode(governed) -> None:
    cluster, _ = governed
    # The round recorded what it wrote for native mode: Kueue, not the portal, takes borrowed GPUs back here.
    for slug in TEAMS:
        applied = AppliedObject.objects.get(object_id=f"kueue_cluster_queue:{slug}")
        assert applied.settings["reclaim_within_cohort"] == "Any"
    # nlp beyond its nominal 8: borrows vision's idle quota and the unguaranteed GPUs, up to its cap of 24.
    for index in range(3):
        submit(cluster, "nlp", f"train-{index}", 8)
    for index in range(3):
        wait_for(lambda i=index: admitted(cluster, "nlp", f"train-{i}"), what=f"Kueue to admit nlp/train-{index}")
    wait_for(lambda: running_gpus(cluster, "nlp") == 24, what="nlp's three pods to run")
    wait_for(lambda: usage(cluster, "nlp") == (24, 16), what="ClusterQueue nlp to report 24 GPUs, 16 borrowed")
    # ...and no further: its borrowingLimit of 16 holds a fourth Job back although 8 GPUs are free.
    submit(cluster, "nlp", "train-3", 8)
    wait_for(lambda: workload_of(cluster, "nlp", "train-3"), what="Kueue to make nlp/train-3's Workload")
    assert not admitted(cluster, "nlp", "train-3")
    cluster.batch.delete_namespaced_job("train-3", "nlp")

    # vision's demand arrives: 8 fit the free GPUs, the next 8 only by taking borrowed ones back.
    submit(cluster, "vision", "infer-0", 8)
    wait_for(lambda: admitted(cluster, "vision", "infer-0"), what="Kueue to admit vision/infer-0")
    submit(cluster, "vision", "infer-1", 8)
    wait_for(lambda: admitted(cluster, "vision", "infer-1"), timeout=60,
             what="Kueue to reclaim nlp's borrowed GPUs for vision/infer-1 (reclaimWithinCohort: Any)")
    evicted = [
        name for name in ("train-0", "train-1", "train-2")
        if (cond := condition(workload_of(cluster, "nlp", name), "Preempted")) is not None
        and cond["reason"] == "InCohortReclamation"
    ]
    assert len(evicted) == 1, "Kueue evicts exactly one of nlp's borrowing Workloads, no more than vision needs"
    wait_for(lambda: running_gpus(cluster, "vision") == 16, what="vision's two pods to run")
    wait_for(lambda: running_gpus(cluster, "nlp") == 16, what="the evicted nlp pod to be deleted")
    suspended = cluster.batch.read_namespaced_job(evicted[0], "nlp")
    assert suspended.spec.suspend is True  # Kueue suspends the Job; the job controller deleted its pod


def test_a_team_borrows_gpus_guaranteed_to_no_team_from_the_lender_queue(governed) -> None:
    cluster, _ = governed
    lender = cluster_queue(cluster, LENDER)
    unguaranteed = POOL - sum(guaranteed for guaranteed, _ in TEAMS.values())
    assert int(gpu_quota(lender)["nominalQuota"]) == unguaranteed == 8
    assert int(gpu_quota(lender)["borrowingLimit"]) == 0 and lender["spec"]["cohortName"] == "gpuportal"
    wait_active(cluster, LENDER)
    # vision takes all of its guarantee; nlp then runs its own 8 and 8 that no team is guaranteed.
    for index in range(2):
        submit(cluster, "vision", f"infer-{index}", 8)
        wait_for(lambda i=index: admitted(cluster, "vision", f"infer-{i}"), what=f"vision/infer-{index} admitted")
    for index in range(2):
        submit(cluster, "nlp", f"train-{index}", 8)
    wait_for(lambda: admitted(cluster, "nlp", "train-1"), timeout=60,
             what="nlp/train-1 admitted on quota borrowed from the lender (pool 32, guarantees 24)")
    assert admitted(cluster, "nlp", "train-0")
    wait_for(lambda: running_gpus(cluster, "nlp") + running_gpus(cluster, "vision") == POOL,
             what="every GPU of the pool running: 24 guaranteed plus the 8 nobody is guaranteed")
    assert running_gpus(cluster, "vision") == 16  # nothing was taken from the owner to make room
