"""Kubernetes governance objects: read and idempotently write team namespaces, GPU ResourceQuotas,
Volcano Queues and (where its CRDs are installed) Kueue ClusterQueues/LocalQueues.

The body builders and parsers are pure (``*_body`` turns an engine object into the API object,
``parse_*`` turns one back), so a round trip is testable without a cluster; :class:`KubernetesGovernance`
does the I/O with the official client. Every object the portal writes carries
``app.kubernetes.io/managed-by: gpuportal`` so a reader can tell it from hand-made ones; namespaces are
matched by their ``gpuportal.io/team`` label, which an admin may also set on a namespace of their own.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from scheduling.engine.governance_types import (
    GPU_QUOTA_KEY,
    GPU_RESOURCE,
    KUEUE_RECLAIM_NEVER,
    MANAGED_BY,
    MANAGED_BY_LABEL,
    TEAM_LABEL,
    K8sNamespace,
    K8sPriorityClass,
    K8sResourceQuota,
    KueueClusterQueue,
    KueueLocalQueue,
    VolcanoQueue,
)

from .errors import MalformedResponse, SourceUnavailable
from .k8s import quantity

VOLCANO = ("scheduling.volcano.sh", "v1beta1", "queues")
KUEUE_GROUP, KUEUE_VERSION = "kueue.x-k8s.io", "v1beta1"
KUEUE_CRDS = (f"clusterqueues.{KUEUE_GROUP}", f"localqueues.{KUEUE_GROUP}")
MERGE_PATCH = "application/merge-patch+json"
MANAGED = {MANAGED_BY_LABEL: MANAGED_BY}


# --------------------------------------------------------------------------------- bodies (pure)


def namespace_body(ns: K8sNamespace) -> dict[str, Any]:
    return {"metadata": {"name": ns.name, "labels": {TEAM_LABEL: ns.team, **MANAGED}}}


def priority_class_body(priority: K8sPriorityClass) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
        "metadata": {"name": priority.name, "labels": dict(MANAGED)},
        "value": priority.value, "globalDefault": False, "preemptionPolicy": "PreemptLowerPriority",
        "description": priority.description,
    }


def parse_priority_class(raw: dict[str, Any]) -> K8sPriorityClass:
    metadata = _metadata(raw, "priorityclass")
    return K8sPriorityClass(name=metadata["name"], value=int(raw.get("value") or 0),
                            description=str(raw.get("description") or ""))


def quota_body(quota: K8sResourceQuota) -> dict[str, Any]:
    return {
        "metadata": {"name": quota.name, "namespace": quota.namespace, "labels": dict(MANAGED)},
        "spec": {"hard": {GPU_QUOTA_KEY: str(quota.gpus)}},
    }


def volcano_queue_body(queue: VolcanoQueue) -> dict[str, Any]:
    """Volcano's Queue: ``capability`` absent (None in a merge patch) means uncapped."""
    capability = {GPU_RESOURCE: str(queue.capability_gpus)} if queue.capability_gpus is not None else None
    return {
        "apiVersion": f"{VOLCANO[0]}/{VOLCANO[1]}",
        "kind": "Queue",
        "metadata": {"name": queue.name, "labels": dict(MANAGED)},
        "spec": {
            "weight": queue.weight,
            "capability": capability,
            "guarantee": {"resource": {GPU_RESOURCE: str(queue.guarantee_gpus)}},
            "reclaimable": queue.reclaimable,
        },
    }


def _kueue_object(kind: str, metadata: dict[str, Any], spec: dict[str, Any]) -> dict[str, Any]:
    metadata = {**metadata, "labels": dict(MANAGED)}
    return {"apiVersion": f"{KUEUE_GROUP}/{KUEUE_VERSION}", "kind": kind, "metadata": metadata, "spec": spec}


def kueue_cluster_queue_body(queue: KueueClusterQueue) -> dict[str, Any]:
    resource: dict[str, Any] = {"name": GPU_RESOURCE, "nominalQuota": queue.nominal_gpus}
    if queue.borrowing_limit_gpus is not None:
        resource["borrowingLimit"] = queue.borrowing_limit_gpus
    if queue.lending_limit_gpus is not None:
        resource["lendingLimit"] = queue.lending_limit_gpus
    flavors = [{"name": queue.flavor, "resources": [resource]}]
    spec = {
        "cohort": queue.cohort,
        "namespaceSelector": {"matchLabels": {TEAM_LABEL: queue.name}},
        "resourceGroups": [{"coveredResources": [GPU_RESOURCE], "flavors": flavors}],
        # Only this policy is the portal's; Kueue's defaults stand for the others (withinClusterQueue, ...).
        "preemption": {"reclaimWithinCohort": queue.reclaim_within_cohort},
    }
    return _kueue_object("ClusterQueue", {"name": queue.name}, spec)


def kueue_local_queue_body(queue: KueueLocalQueue) -> dict[str, Any]:
    metadata = {"name": queue.name, "namespace": queue.namespace}
    return _kueue_object("LocalQueue", metadata, {"clusterQueue": queue.cluster_queue})


# -------------------------------------------------------------------------------- parsers (pure)


def _metadata(raw: dict[str, Any], where: str) -> dict[str, Any]:
    metadata = raw.get("metadata")
    if not isinstance(metadata, dict) or not metadata.get("name"):
        raise MalformedResponse(f"kubernetes {where}: no metadata.name")
    return metadata


def parse_namespace(raw: dict[str, Any]) -> K8sNamespace:
    metadata = _metadata(raw, "namespace")
    return K8sNamespace(name=metadata["name"], team=(metadata.get("labels") or {}).get(TEAM_LABEL, ""))


def parse_quota(raw: dict[str, Any]) -> K8sResourceQuota:
    metadata = _metadata(raw, "resourcequota")
    hard = (raw.get("spec") or {}).get("hard") or {}
    return K8sResourceQuota(metadata.get("namespace", ""), metadata["name"], quantity(hard.get(GPU_QUOTA_KEY)))


def quota_usage(raw: dict[str, Any]) -> tuple[int, int] | None:
    """(hard, used) GPUs from the status kube-controller-manager keeps; None until it has synced."""
    status = raw.get("status") or {}
    if GPU_QUOTA_KEY not in (status.get("hard") or {}):
        return None
    return quantity(status["hard"][GPU_QUOTA_KEY]), quantity((status.get("used") or {}).get(GPU_QUOTA_KEY))


def parse_volcano_queue(raw: dict[str, Any]) -> VolcanoQueue:
    metadata = _metadata(raw, "volcano queue")
    spec = raw.get("spec") or {}
    capability = (spec.get("capability") or {}).get(GPU_RESOURCE)
    guarantee = ((spec.get("guarantee") or {}).get("resource") or {}).get(GPU_RESOURCE)
    return VolcanoQueue(
        name=metadata["name"],
        weight=int(spec.get("weight") or 1),  # Volcano's default weight is 1
        guarantee_gpus=quantity(guarantee),
        capability_gpus=quantity(capability) if capability is not None else None,
        reclaimable=bool(spec.get("reclaimable", True)),  # and reclaimable defaults to true
    )


def parse_kueue_cluster_queue(raw: dict[str, Any]) -> KueueClusterQueue:
    metadata = _metadata(raw, "kueue clusterqueue")
    spec = raw.get("spec") or {}
    reclaim = str((spec.get("preemption") or {}).get("reclaimWithinCohort") or KUEUE_RECLAIM_NEVER)
    for group in spec.get("resourceGroups") or ():
        for flavor in group.get("flavors") or ():
            for resource in flavor.get("resources") or ():
                if resource.get("name") == GPU_RESOURCE:
                    limits = (resource.get("borrowingLimit"), resource.get("lendingLimit"))
                    return KueueClusterQueue(
                        name=metadata["name"],
                        cohort=str(spec.get("cohort") or ""),
                        flavor=str(flavor.get("name") or ""),
                        nominal_gpus=quantity(resource.get("nominalQuota")),
                        borrowing_limit_gpus=quantity(limits[0]) if limits[0] is not None else None,
                        lending_limit_gpus=quantity(limits[1]) if limits[1] is not None else None,
                        reclaim_within_cohort=reclaim,
                    )
    return KueueClusterQueue(metadata["name"], str(spec.get("cohort") or ""), "", 0, None, None, reclaim)


def parse_kueue_local_queue(raw: dict[str, Any]) -> KueueLocalQueue:
    metadata = _metadata(raw, "kueue localqueue")
    return KueueLocalQueue(
        metadata.get("namespace", ""), metadata["name"], (raw.get("spec") or {}).get("clusterQueue", "")
    )


# ------------------------------------------------------------------------------------------ I/O


def _failed(what: str, exc: ApiException) -> SourceUnavailable:
    status = exc.status or 0
    return SourceUnavailable(
        f"kubernetes: {what} -> HTTP {status} {exc.reason}",
        retryable=status >= 500 or status in (0, 409, 429),
        status=status or None,
    )


def _call(what: str, call: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    try:
        return call(*args, **kwargs)
    except ApiException as exc:
        raise _failed(what, exc) from exc


def _plain(obj: Any, api_client: k8s.ApiClient) -> dict[str, Any]:
    """A typed client object as the plain dict the parsers read (custom objects already are)."""
    return obj if isinstance(obj, dict) else dict(api_client.sanitize_for_serialization(obj))


class KubernetesGovernance:
    """Reads and writes the governance objects of one cluster. ``ensure_*`` is idempotent: it creates
    what is missing, patches what differs, and returns whether it wrote anything."""

    def __init__(self, api_client: k8s.ApiClient) -> None:
        self.api_client = api_client
        self.core = k8s.CoreV1Api(api_client)
        self.custom = k8s.CustomObjectsApi(api_client)
        self.extensions = k8s.ApiextensionsV1Api(api_client)
        self.scheduling = k8s.SchedulingV1Api(api_client)

    # ----------------------------------------------------------------------------------- detect
    def kueue_installed(self) -> bool:
        """True when both Kueue CRDs are served; a cluster without them gets no Kueue objects."""
        for name in KUEUE_CRDS:
            try:
                self.extensions.read_custom_resource_definition(name)
            except ApiException as exc:
                if exc.status == 404:
                    return False
                raise _failed(f"read CRD {name}", exc) from exc
        return True

    # ------------------------------------------------------------------------------------- read
    def read_namespaces(self) -> list[K8sNamespace]:
        """Every namespace labelled with a team (the portal's and those an admin labelled by hand)."""
        found = _call("list namespaces", self.core.list_namespace, label_selector=TEAM_LABEL)
        return [parse_namespace(_plain(ns, self.api_client)) for ns in found.items]

    def namespace_names(self) -> set[str]:
        """Every namespace on the cluster, labelled or not (an explicit mapping must name existing ones)."""
        found = _call("list namespaces", self.core.list_namespace)
        return {ns.metadata.name for ns in found.items}

    def read_quotas(self) -> list[K8sResourceQuota]:
        found = _call(
            "list resourcequotas",
            self.core.list_resource_quota_for_all_namespaces,
            label_selector=f"{MANAGED_BY_LABEL}={MANAGED_BY}",
        )
        return [parse_quota(_plain(q, self.api_client)) for q in found.items]

    def read_priority_classes(self) -> list[K8sPriorityClass]:
        """The priority classes the portal made (the webhook's): hand-made ones are not governance's."""
        found = _call("list priorityclasses", self.scheduling.list_priority_class,
                      label_selector=f"{MANAGED_BY_LABEL}={MANAGED_BY}")
        return [parse_priority_class(_plain(p, self.api_client)) for p in found.items]

    def quota_status(self, namespace: str, name: str) -> tuple[int, int] | None:
        raw = _call("read resourcequota", self.core.read_namespaced_resource_quota, name, namespace)
        return quota_usage(_plain(raw, self.api_client))

    def read_volcano_queues(self) -> list[VolcanoQueue]:
        found = _call("list volcano queues", self.custom.list_cluster_custom_object, *VOLCANO)
        return [parse_volcano_queue(q) for q in found.get("items") or ()]

    def read_kueue_cluster_queues(self) -> list[KueueClusterQueue]:
        found = _call(
            "list clusterqueues", self.custom.list_cluster_custom_object, KUEUE_GROUP, KUEUE_VERSION, "clusterqueues"
        )
        return [parse_kueue_cluster_queue(q) for q in found.get("items") or ()]

    def read_kueue_local_queues(self) -> list[KueueLocalQueue]:
        found = _call(
            "list localqueues", self.custom.list_cluster_custom_object, KUEUE_GROUP, KUEUE_VERSION, "localqueues"
        )
        return [parse_kueue_local_queue(q) for q in found.get("items") or ()]

    # ------------------------------------------------------------------------------------ write
    def _read_or_none(self, what: str, call: Callable[..., Any], *args: Any) -> dict[str, Any] | None:
        try:
            return _plain(call(*args), self.api_client)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise _failed(what, exc) from exc

    def ensure_namespace(self, ns: K8sNamespace) -> bool:
        current = self._read_or_none("read namespace", self.core.read_namespace, ns.name)
        body = namespace_body(ns)
        if current is None:
            _call("create namespace", self.core.create_namespace, body)
            return True
        if parse_namespace(current) == ns:
            return False
        _call("patch namespace", self.core.patch_namespace, ns.name, {"metadata": body["metadata"]})
        return True

    def ensure_priority_class(self, priority: K8sPriorityClass) -> bool:
        """Create the class, or make it agree: its ``value`` is immutable, so a class with another value is
        replaced (pods already running keep the number they were admitted with)."""
        current = self._read_or_none("read priorityclass", self.scheduling.read_priority_class, priority.name)
        body = priority_class_body(priority)
        if current is not None and parse_priority_class(current) == priority:
            return False
        if current is not None and int(current.get("value") or 0) == priority.value:
            _call("patch priorityclass", self.scheduling.patch_priority_class, priority.name,
                  {"metadata": body["metadata"], "description": priority.description})
            return True
        if current is not None:
            _call("delete priorityclass", self.scheduling.delete_priority_class, priority.name)
        _call("create priorityclass", self.scheduling.create_priority_class, body)
        return True

    def ensure_quota(self, quota: K8sResourceQuota) -> bool:
        current = self._read_or_none(
            "read resourcequota", self.core.read_namespaced_resource_quota, quota.name, quota.namespace
        )
        body = quota_body(quota)
        if current is None:
            _call("create resourcequota", self.core.create_namespaced_resource_quota, quota.namespace, body)
            return True
        if parse_quota(current) == quota:
            return False
        _call("patch resourcequota", self.core.patch_namespaced_resource_quota, quota.name, quota.namespace, body)
        return True

    def remove_quota(self, namespace: str, name: str) -> bool:
        try:
            self.core.delete_namespaced_resource_quota(name, namespace)
        except ApiException as exc:
            if exc.status == 404:
                return False
            raise _failed("delete resourcequota", exc) from exc
        return True

    def _ensure_custom(self, plural: tuple[str, str, str], body: dict[str, Any], same: Callable[[Any], bool]) -> bool:
        name = body["metadata"]["name"]
        current = self._read_or_none(f"read {plural[2]}", self.custom.get_cluster_custom_object, *plural, name)
        if current is None:
            _call(f"create {plural[2]}", self.custom.create_cluster_custom_object, *plural, body)
            return True
        if same(current):
            return False
        patch = {"metadata": {"labels": body["metadata"]["labels"]}, "spec": body["spec"]}
        _call(
            f"patch {plural[2]}",
            self.custom.patch_cluster_custom_object,
            *plural,
            name,
            patch,
            _content_type=MERGE_PATCH,
        )
        return True

    def _remove_custom(self, plural: tuple[str, str, str], name: str) -> bool:
        try:
            self.custom.delete_cluster_custom_object(*plural, name)
        except ApiException as exc:
            if exc.status == 404:
                return False
            raise _failed(f"delete {plural[2]}", exc) from exc
        return True

    def ensure_volcano_queue(self, queue: VolcanoQueue) -> bool:
        return self._ensure_custom(VOLCANO, volcano_queue_body(queue), lambda raw: parse_volcano_queue(raw) == queue)

    def remove_volcano_queue(self, name: str) -> bool:
        return self._remove_custom(VOLCANO, name)

    def ensure_kueue_cluster_queue(self, queue: KueueClusterQueue) -> bool:
        plural = (KUEUE_GROUP, KUEUE_VERSION, "clusterqueues")
        body = kueue_cluster_queue_body(queue)
        return self._ensure_custom(plural, body, lambda raw: parse_kueue_cluster_queue(raw) == queue)

    def remove_kueue_cluster_queue(self, name: str) -> bool:
        return self._remove_custom((KUEUE_GROUP, KUEUE_VERSION, "clusterqueues"), name)

    def ensure_kueue_local_queue(self, queue: KueueLocalQueue) -> bool:
        args = (KUEUE_GROUP, KUEUE_VERSION, queue.namespace, "localqueues")
        current = self._read_or_none("read localqueue", self.custom.get_namespaced_custom_object, *args, queue.name)
        body = kueue_local_queue_body(queue)
        if current is None:
            _call("create localqueue", self.custom.create_namespaced_custom_object, *args, body)
            return True
        if parse_kueue_local_queue(current) == queue:
            return False
        _call(
            "patch localqueue",
            self.custom.patch_namespaced_custom_object,
            *args,
            queue.name,
            {"spec": body["spec"]},
            _content_type=MERGE_PATCH,
        )
        return True
