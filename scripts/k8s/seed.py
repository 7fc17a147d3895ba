"""Seed the live Kubernetes fixture (scripts/k8s/start.sh) with a small GPU fleet and its work.

KWOK (started by start.sh) plays the kubelets; this script plays what Volcano and a node's first boot would:

- registers 6 x 8-GPU Node objects (capacity/allocatable ``nvidia.com/gpu: 8``, GPU product and topology
  labels) annotated ``kwok.x-k8s.io/node=fake``, waits for KWOK to report them Ready, and lifts the
  ``node.kubernetes.io/not-ready`` taint the TaintNodesByCondition admission put on them (the node
  lifecycle controller's part, which the fixture does not run);
- cordons and taints one node (dgx06), as an admin draining it would;
- installs Volcano's Queue and PodGroup CRDs (plain CRDs, ``scheduling.volcano.sh/v1beta1``), three
  Queues, and binds the one Volcano gang that fits (Volcano's binder is a ``pods/binding`` call);
- creates default-scheduler pods one by one and lets the REAL kube-scheduler bind them; KWOK then
  starts them (phase Running, containers running, a pod IP);
- leaves pending: a 16-GPU pod the scheduler marks Unschedulable ("Insufficient nvidia.com/gpu"), and a
  4 x 8-GPU Volcano gang whose PodGroup says NotEnoughResources;
- lets one bound pod finish: annotated ``gpuportal.io/runtime`` (kwok-stages.yaml), KWOK reports it
  Succeeded; it no longer holds GPUs.

Expects the empty cluster start.sh leaves (it is not idempotent). Also a CLI:
``.venv/bin/python scripts/k8s/seed.py $K8S_ADMIN_KUBECONFIG`` prints a JSON summary.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.client.exceptions import ApiException

GPU = "nvidia.com/gpu"
VOLCANO_GROUP, VOLCANO_VERSION = "scheduling.volcano.sh", "v1beta1"
GROUP_ANNOTATION = "scheduling.k8s.io/group-name"
QUEUE_ANNOTATION = "scheduling.volcano.sh/queue-name"
PRODUCT = "NVIDIA-H100-80GB-HBM3"
# dgx01-03 under leaf1, dgx04-06 under leaf2, both leaves under spine1.
NODES = {f"dgx{i:02d}": ("leaf1" if i <= 3 else "leaf2") for i in range(1, 7)}
DRAINED_NODE = "dgx06"
# KWOK manages the nodes carrying this annotation (start.sh: --manage-nodes-with-annotation-selector).
KWOK_ANNOTATION = {"kwok.x-k8s.io/node": "fake"}
# kwok-stages.yaml: a Running pod with this annotation (a Go duration) finishes Succeeded that long after.
RUNTIME_ANNOTATION = "gpuportal.io/runtime"
DRAIN_TAINT = {"key": "portal.example.com/drain", "value": "maint", "effect": "NoSchedule"}
NAMESPACES = ("vision", "llm", "hpo")
QUEUES = {
    "default": {"weight": 1, "reclaimable": True},
    "prod": {"weight": 8, "reclaimable": False, "guarantee": {"resource": {GPU: 16}}},
    "research": {"weight": 4, "reclaimable": False, "capability": {"cpu": "800", GPU: 32}},
}
# Bound by "Volcano" (this script) to two whole nodes of leaf2 before any other pod exists.
RUNNING_GANG = ("llm", "pretrain", "research", 2, 8, ("dgx04", "dgx05"))
# Cannot fit: 32 GPUs wanted, at most 2 free once everything else is placed.
BLOCKED_GANG = ("llm", "big-run", "prod", 4, 8)
TOO_BIG = ("vision", "too-big", 16)
FINISHED = ("hpo", "finished", 2)


@dataclass(frozen=True)
class Pod:
    namespace: str
    name: str
    gpus: int
    init_gpus: int = 0
    priority_class: str = ""
    owner_replicaset: str = ""
    user: str = "alice"


# Created largest first, each waited for, so the scheduler can always place the next one
# (its default scoring ignores extended resources, so it may spread small pods anywhere).
BOUND_PODS = (
    Pod("llm", "finetune", 8, priority_class="gpuportal-high", user="bob"),
    Pod("vision", "train-a", 4),
    Pod("vision", "prep", 1, init_gpus=2),  # holds 2: the init container runs alone, first
    Pod("hpo", "trial-0", 2, user="carol"),
    Pod("hpo", "trial-1", 2, user="carol"),
    Pod("hpo", "trial-2", 2, user="carol"),
    Pod("vision", "serve-a", 1, owner_replicaset="serve"),
    Pod("vision", "serve-b", 1, owner_replicaset="serve"),
)


@dataclass
class Seeded:
    """What the seed made, for tests and the CLI summary."""

    nodes: list[str] = field(default_factory=list)
    bound: dict[str, str] = field(default_factory=dict)  # "ns/pod" -> node
    seconds: float = 0.0


def wait(what: str, check: Callable[[], Any], timeout: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.1)
    raise TimeoutError(f"timed out waiting for {what}")


# ------------------------------------------------------------------------------------------- nodes


def node_body(name: str, block: str, gpus: int = 8, spine: str = "spine1") -> dict[str, Any]:
    resources = {
        "cpu": "224",
        "memory": "2064100Mi",
        "pods": "110",
        "ephemeral-storage": "3750000000Ki",
        GPU: str(gpus),
    }
    return {
        "metadata": {
            "name": name,
            "annotations": dict(KWOK_ANNOTATION),
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "nvidia.com/gpu.product": PRODUCT,
                "nvidia.com/gpu.count": str(gpus),
                "network.topology.kubernetes.io/block": block,
                "network.topology.kubernetes.io/spine": spine,
                "topology.kubernetes.io/zone": f"zone-{block}",
            },
        },
        "status": {"capacity": resources, "allocatable": resources},
    }


def node_ready(node: k8s.V1Node) -> bool:
    return any(c.type == "Ready" and c.status == "True" for c in (node.status.conditions or ()))


def register_nodes(core: k8s.CoreV1Api, bodies: list[dict[str, Any]], timeout: float = 120.0) -> None:
    """Create the Nodes (as each kubelet would on its first start), wait for KWOK to report them Ready,
    then do the node lifecycle controller's part: lift the not-ready taint TaintNodesByCondition set."""
    for body in bodies:
        core.create_node(body)
    waiting = {body["metadata"]["name"] for body in bodies}
    deadline = time.monotonic() + timeout
    while waiting:
        if time.monotonic() > deadline:
            raise TimeoutError(f"KWOK did not report {len(waiting)} nodes Ready, e.g. {sorted(waiting)[:3]}")
        for node in core.list_node(label_selector=None).items:
            name = node.metadata.name
            if name in waiting and node_ready(node):
                kept = [t.to_dict() for t in node.spec.taints or () if t.key != "node.kubernetes.io/not-ready"]
                core.patch_node(name, {"spec": {"taints": kept or None}})
                waiting.discard(name)
        if waiting:
            time.sleep(0.2)


# ----------------------------------------------------------------------------------------- volcano


def crd(
    kind: str, plural: str, scope: str, short: str, group: str = VOLCANO_GROUP, version: str = VOLCANO_VERSION
) -> dict[str, Any]:
    """A plain CRD with Volcano's names (or another group's, e.g. Kueue's for the governance tests): no
    schema beyond 'keep every field' (no controller runs to validate or default them) and a status
    subresource, as Volcano's own CRDs have."""
    schema = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}"},
        "spec": {
            "group": group,
            "scope": scope,
            "names": {"kind": kind, "plural": plural, "singular": kind.lower(), "shortNames": [short]},
            "versions": [
                {
                    "name": version,
                    "served": True,
                    "storage": True,
                    "schema": {"openAPIV3Schema": schema},
                    "subresources": {"status": {}},
                }
            ],
        },
    }


def install_volcano_crds(api_client: k8s.ApiClient) -> None:
    ext = k8s.ApiextensionsV1Api(api_client)
    for body in (crd("Queue", "queues", "Cluster", "q"), crd("PodGroup", "podgroups", "Namespaced", "pg")):
        ext.create_custom_resource_definition(body)

    def established() -> bool:
        for name in ("queues", "podgroups"):
            found = ext.read_custom_resource_definition(f"{name}.{VOLCANO_GROUP}")
            conditions = (found.status.conditions if found.status else None) or []
            if not any(c.type == "Established" and c.status == "True" for c in conditions):
                return False
        return True

    wait("the Volcano CRDs to be established", established)


def merge_status(custom: k8s.CustomObjectsApi, plural: str, name: str, status: dict[str, Any], ns: str = "") -> None:
    """Custom resources take no strategic-merge patch: send a JSON merge patch explicitly."""
    body = {"status": status}
    content = "application/merge-patch+json"
    if ns:
        custom.patch_namespaced_custom_object_status(
            VOLCANO_GROUP, VOLCANO_VERSION, ns, plural, name, body, _content_type=content
        )
    else:
        custom.patch_cluster_custom_object_status(
            VOLCANO_GROUP, VOLCANO_VERSION, plural, name, body, _content_type=content
        )


def create_queues(custom: k8s.CustomObjectsApi) -> None:
    for name, spec in QUEUES.items():
        body = {"apiVersion": f"{VOLCANO_GROUP}/{VOLCANO_VERSION}", "kind": "Queue", "metadata": {"name": name}}
        custom.create_cluster_custom_object(VOLCANO_GROUP, VOLCANO_VERSION, "queues", {**body, "spec": spec})
        merge_status(custom, "queues", name, {"state": "Open"})


def create_podgroup(
    custom: k8s.CustomObjectsApi, ns: str, name: str, queue: str, members: int, gpus: int, status: dict[str, Any]
) -> None:
    body = {
        "apiVersion": f"{VOLCANO_GROUP}/{VOLCANO_VERSION}",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"minMember": members, "minResources": {GPU: members * gpus}, "queue": queue},
    }
    custom.create_namespaced_custom_object(VOLCANO_GROUP, VOLCANO_VERSION, ns, "podgroups", body)
    merge_status(custom, "podgroups", name, status, ns)


def podgroup_condition(kind: str, reason: str, message: str) -> dict[str, Any]:
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    return {
        "type": kind,
        "status": "True",
        "reason": reason,
        "message": message,
        "lastTransitionTime": now,
        "transitionID": "fixture",
    }


# -------------------------------------------------------------------------------------------- pods


def pod_body(
    pod: Pod,
    *,
    scheduler: str = "default-scheduler",
    group: str = "",
    queue: str = "",
    owner_uid: str = "",
    runtime: str = "",
) -> dict[str, Any]:
    def container(name: str, gpus: int) -> dict[str, Any]:
        wanted = {"cpu": "4", "memory": "32Gi", GPU: str(gpus)}
        return {
            "name": name,
            "image": "registry.invalid/gpuportal/sleep:1",  # never pulled: KWOK plays the kubelet
            "command": ["sleep", "infinity"],
            "resources": {"requests": wanted, "limits": {GPU: str(gpus)}},
        }

    annotations = {GROUP_ANNOTATION: group, QUEUE_ANNOTATION: queue} if group else {}
    if runtime:  # a Go duration: KWOK reports the pod Succeeded that long after it started
        annotations[RUNTIME_ANNOTATION] = runtime
    owners = (
        [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": pod.owner_replicaset, "uid": owner_uid}]
        if pod.owner_replicaset
        else []
    )
    spec: dict[str, Any] = {
        "schedulerName": scheduler,
        "restartPolicy": "Never",
        "containers": [container("main", pod.gpus)],
        "tolerations": [{"key": GPU, "operator": "Exists", "effect": "NoSchedule"}],
    }
    if pod.init_gpus:
        spec["initContainers"] = [container("stage-data", pod.init_gpus)]
    if pod.priority_class:
        spec["priorityClassName"] = pod.priority_class
    return {
        "metadata": {
            "name": pod.name,
            "namespace": pod.namespace,
            "labels": {"app": pod.name, "user": pod.user},
            "annotations": annotations,
            "ownerReferences": owners,
        },
        "spec": spec,
    }


def bound_node(core: k8s.CoreV1Api, ns: str, name: str) -> str:
    return core.read_namespaced_pod(name, ns).spec.node_name or ""


def scheduled_condition(core: k8s.CoreV1Api, ns: str, name: str) -> Any:
    conditions = core.read_namespaced_pod(name, ns).status.conditions or []
    return next((c for c in conditions if c.type == "PodScheduled"), None)


def bind(core: k8s.CoreV1Api, ns: str, name: str, node: str) -> None:
    """Volcano's binder: a pods/binding call. The answer is read raw: the typed client cannot
    deserialise the Status this subresource returns."""
    body = k8s.V1Binding(metadata=k8s.V1ObjectMeta(name=name), target=k8s.V1ObjectReference(kind="Node", name=node))
    core.create_namespaced_pod_binding(name, ns, body, _preload_content=False).release_conn()


def create_replicaset(api_client: k8s.ApiClient, ns: str, name: str) -> str:
    """The owner of the serving pods. The fixture runs no ReplicaSet controller, so it never makes pods itself."""
    body = {
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "replicas": 0,  # nothing to reconcile even if a controller ever ran
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "main", "image": "registry.invalid/gpuportal/sleep:1"}]},
            },
        },
    }
    return str(k8s.AppsV1Api(api_client).create_namespaced_replica_set(ns, body).metadata.uid)


# -------------------------------------------------------------------------------------------- seed


def seed(api_client: k8s.ApiClient) -> Seeded:
    started = time.monotonic()
    core, custom, result = k8s.CoreV1Api(api_client), k8s.CustomObjectsApi(api_client), Seeded()
    for ns in NAMESPACES:
        core.create_namespace({"metadata": {"name": ns}})
    k8s.SchedulingV1Api(api_client).create_priority_class(
        {"metadata": {"name": "gpuportal-high"}, "value": 1000, "description": "fixture: production training"}
    )
    grant_portal_role(api_client)
    install_volcano_crds(api_client)
    create_queues(custom)
    register_nodes(core, [node_body(name, block) for name, block in NODES.items()])
    result.nodes.extend(NODES)
    core.patch_node(DRAINED_NODE, {"spec": {"unschedulable": True, "taints": [DRAIN_TAINT]}})

    ns, group, queue, members, gpus, targets = RUNNING_GANG
    create_podgroup(custom, ns, group, queue, members, gpus, {"phase": "Running", "running": members, "conditions": []})
    for index, node in enumerate(targets):
        name = f"{group}-{index}"
        core.create_namespaced_pod(ns, pod_body(Pod(ns, name, gpus), scheduler="volcano", group=group, queue=queue))
        bind(core, ns, name, node)
        result.bound[f"{ns}/{name}"] = node
    # The scheduler learns of these bindings through its watch; give it a moment before it places
    # the next pod, or it could put one on a node it still thinks empty (check_fits catches that).
    time.sleep(0.5)

    # Finished work first: bound, run and reported Succeeded by KWOK, so it frees its GPUs before the rest.
    ns, name, gpus = FINISHED
    core.create_namespaced_pod(ns, pod_body(Pod(ns, name, gpus), runtime="0s"))
    wait(f"{ns}/{name} to finish", lambda: core.read_namespaced_pod(name, ns).status.phase == "Succeeded")

    owner_uid = create_replicaset(api_client, "vision", "serve")
    for pod in BOUND_PODS:
        core.create_namespaced_pod(pod.namespace, pod_body(pod, owner_uid=owner_uid))
        node = wait(f"{pod.namespace}/{pod.name} to be bound", lambda p=pod: bound_node(core, p.namespace, p.name))
        result.bound[f"{pod.namespace}/{pod.name}"] = node

    ns, name, gpus = TOO_BIG
    core.create_namespaced_pod(ns, pod_body(Pod(ns, name, gpus)))
    wait(
        f"{ns}/{name} to be marked Unschedulable",
        lambda: (c := scheduled_condition(core, ns, name)) is not None and c.reason == "Unschedulable",
    )

    ns, group, queue, members, gpus = BLOCKED_GANG
    message = f"{members}/{members} tasks in gang unschedulable: pod group is not ready, {members} Pending"
    status = {
        "phase": "Pending",
        "running": 0,
        "conditions": [podgroup_condition("Unschedulable", "NotEnoughResources", message)],
    }
    create_podgroup(custom, ns, group, queue, members, gpus, status)
    for index in range(members):
        pod = Pod(ns, f"{group}-{index}", gpus, user="bob")
        core.create_namespaced_pod(ns, pod_body(pod, scheduler="volcano", group=group, queue=queue))

    wait("KWOK to start every bound pod", lambda: all_bound_pods_running(core))
    check_fits(core)
    result.seconds = time.monotonic() - started
    return result


def all_bound_pods_running(core: k8s.CoreV1Api) -> bool:
    return all(
        pod.status.phase in ("Running", "Succeeded", "Failed")
        for pod in core.list_pod_for_all_namespaces().items
        if pod.spec.node_name
    )


def check_fits(core: k8s.CoreV1Api) -> None:
    """No node holds more GPUs than it has: the layout above must leave the scheduler no choice."""
    held: dict[str, int] = {}
    for pod in core.list_pod_for_all_namespaces().items:
        if pod.spec.node_name and pod.status.phase not in ("Succeeded", "Failed"):
            app = sum(int((c.resources.requests or {}).get(GPU, 0)) for c in pod.spec.containers)
            init = max(
                (int((c.resources.requests or {}).get(GPU, 0)) for c in pod.spec.init_containers or ()), default=0
            )
            held[pod.spec.node_name] = held.get(pod.spec.node_name, 0) + max(app, init)
    over = {node: gpus for node, gpus in held.items() if gpus > 8}
    if over:
        raise RuntimeError(f"seed.py: nodes over their 8 GPUs: {over}")


WRITE_VERBS = ("get", "list", "watch", "create", "update", "patch", "delete")
PORTAL_RULES = [
    {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch", "patch"]},
    {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch", "patch"]},
    # Reclaim of borrowed GPUs, admission bypasses an admin chose to evict (option admission_bypass) and a
    # person's cancel of their own job (job_control.py): evictions, so PodDisruptionBudgets hold.
    {"apiGroups": [""], "resources": ["pods/eviction"], "verbs": ["create"]},
    {"apiGroups": [VOLCANO_GROUP], "resources": ["podgroups"], "verbs": ["get", "list", "watch"]},
    # Governance: the portal writes each team's namespaces, GPU quotas and Volcano Queue (and Kueue's
    # queues where those CRDs exist), and reads the CRD list to detect which of them the cluster has.
    # The collector also lists every namespace's labels for the admission webhook's namespaceSelector.
    {"apiGroups": [""], "resources": ["namespaces"], "verbs": ["get", "list", "watch", "create", "patch"]},
    {"apiGroups": [""], "resources": ["resourcequotas"], "verbs": [*WRITE_VERBS]},
    {"apiGroups": [VOLCANO_GROUP], "resources": ["queues"], "verbs": [*WRITE_VERBS]},
    # Governance: the priority classes the admission webhook sets.
    {"apiGroups": ["scheduling.k8s.io"], "resources": ["priorityclasses"], "verbs": [*WRITE_VERBS]},
    {"apiGroups": ["kueue.x-k8s.io"], "resources": ["clusterqueues", "localqueues"], "verbs": [*WRITE_VERBS]},
    {"apiGroups": ["apiextensions.k8s.io"], "resources": ["customresourcedefinitions"], "verbs": ["get", "list"]},
    # Collector: when the portal's admission webhook was registered ("admission bypassed" findings).
    {"apiGroups": ["admissionregistration.k8s.io"], "resources": ["mutatingwebhookconfigurations"],
     "resourceNames": ["gpuportal-admission"], "verbs": ["get"]},
]


def grant_portal_role(api_client: k8s.ApiClient) -> None:
    """The portal's least privilege: read nodes/pods/Volcano objects, patch nodes, and write the
    governance objects (team namespaces, ResourceQuotas, Volcano/Kueue queues). Nothing else."""
    rbac = k8s.RbacAuthorizationV1Api(api_client)
    rbac.create_cluster_role({"metadata": {"name": "gpuportal-portal"}, "rules": PORTAL_RULES})
    rbac.create_cluster_role_binding(
        {
            "metadata": {"name": "gpuportal-portal"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "gpuportal-portal"},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "gpuportal:portal"}],
        }
    )


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: seed.py ADMIN_KUBECONFIG", file=sys.stderr)
        return 2
    api_client = k8s_config.new_client_from_config(config_file=argv[1])
    try:
        done = seed(api_client)
    except ApiException as exc:
        print(f"seed.py: HTTP {exc.status} {exc.reason}: {exc.body}", file=sys.stderr)
        return 1
    print(json.dumps({"nodes": done.nodes, "bound": done.bound, "seconds": round(done.seconds, 2)}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
