"""Kubernetes + Volcano collector: the official client -> :class:`Snapshot`.

Lists are read page by page (``limit``/``continue``) as raw JSON (``_preload_content=False``): turning
150,000 pods into the client's model objects would cost far more time and memory than the dicts we
need. A page that fails, or a ``continue`` token that expires (HTTP 410), fails the whole list: there
is no half snapshot.
"""

from __future__ import annotations

import json
import time
from collections import defaultdict
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from functools import partial
from typing import Any

from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException
from urllib3.exceptions import HTTPError as Urllib3Error

from scheduling.engine.types import OrchestratorKind, WorkloadKind

from .errors import MalformedResponse, SourceUnavailable
from .httpjson import require
from .reliability import DEFAULT_RETRY, CircuitBreaker, RetryPolicy, guarded, with_retries
from .snapshot import (
    DEFAULT_LABELS,
    DEFAULT_TEAMS,
    ObservedNode,
    ObservedQueue,
    ObservedWorkload,
    Snapshot,
    Taint,
    TeamMapping,
    TopologyLabels,
    WorkloadState,
)

GPU_RESOURCE = "nvidia.com/gpu"
GROUP_ANNOTATION = "scheduling.k8s.io/group-name"
VOLCANO = ("scheduling.volcano.sh", "v1beta1")
SERVICE_OWNERS = frozenset({"ReplicaSet", "StatefulSet", "Deployment"})
# Taints a GPU pod is expected to tolerate (the device plugin's own); any other NoSchedule/NoExecute
# taint keeps new work off the node, which is how the portal drains it.
TOLERATED_TAINTS = frozenset({GPU_RESOURCE})
PODGROUP_STATES = {
    "Running": WorkloadState.RUNNING,
    "Pending": WorkloadState.PENDING,
    "Inqueue": WorkloadState.PENDING,
}


def epoch(timestamp: str | None) -> float | None:
    """RFC 3339 (``2026-12-02T15:32:39Z``) -> epoch seconds."""
    if not timestamp:
        return None
    return datetime.fromisoformat(timestamp.replace("Z", "+00:00")).timestamp()


def quantity(value: Any) -> int:
    """Whole-unit quantity of an extended resource (GPUs are integers: ``"8"`` or ``8``)."""
    if value is None:
        return 0
    try:
        return int(str(value))
    except ValueError as exc:
        raise MalformedResponse(f"unreadable GPU quantity {value!r}") from exc


def pod_gpus(pod: dict[str, Any], resource: str = GPU_RESOURCE) -> int:
    """GPUs a pod holds: the larger of its app containers' sum and its largest init container
    (init containers run one at a time, before the app containers)."""
    cached = pod.get("_gpus")  # set by slim_pod: counted once per pod, not once per use
    if cached is not None:
        return int(cached)
    spec = pod.get("spec") or {}

    def wanted(container: dict[str, Any]) -> int:
        resources = container.get("resources") or {}
        requested = (resources.get("requests") or {}).get(resource)
        return quantity(requested if requested is not None else (resources.get("limits") or {}).get(resource))

    app = sum(wanted(c) for c in spec.get("containers") or ())
    init = max((wanted(c) for c in spec.get("initContainers") or ()), default=0)
    return max(app, init)


Slimmer = Callable[[dict[str, Any]], dict[str, Any] | None]
_KEPT_ANNOTATIONS = (GROUP_ANNOTATION, "scheduling.volcano.sh/queue-name")


def slim_pod(pod: dict[str, Any], resource: str = GPU_RESOURCE) -> dict[str, Any] | None:
    """The few fields of a pod this collector reads, or ``None`` for a pod without GPUs (it takes no
    part in GPU accounting). Keeps memory flat on clusters with 100,000s of pods."""
    gpus = pod_gpus(pod, resource)
    if not gpus:
        return None
    metadata, spec, status = pod.get("metadata") or {}, pod.get("spec") or {}, pod.get("status") or {}
    annotations = metadata.get("annotations") or {}

    def resources_only(containers: Any) -> list[dict[str, Any]]:
        return [{"resources": c.get("resources") or {}} for c in containers or ()]

    return {
        "_gpus": gpus,
        "metadata": {
            "name": metadata.get("name"),
            "namespace": metadata.get("namespace"),
            "labels": metadata.get("labels") or {},
            "annotations": {k: annotations[k] for k in _KEPT_ANNOTATIONS if k in annotations},
            "ownerReferences": [{"kind": o.get("kind")} for o in metadata.get("ownerReferences") or ()],
            "creationTimestamp": metadata.get("creationTimestamp"),
        },
        "spec": {
            "nodeName": spec.get("nodeName"),
            "priority": spec.get("priority"),
            "containers": resources_only(spec.get("containers")),
            "initContainers": resources_only(spec.get("initContainers")),
        },
        "status": {
            "phase": status.get("phase"),
            "startTime": status.get("startTime"),
            "conditions": [c for c in status.get("conditions") or () if c.get("type") == "PodScheduled"],
        },
    }


def _condition(obj: dict[str, Any], kind: str) -> dict[str, Any]:
    return next((c for c in (obj.get("status") or {}).get("conditions") or () if c.get("type") == kind), {})


def parse_node(
    raw: dict[str, Any],
    allocated: int,
    *,
    orchestrator: str,
    resource: str = GPU_RESOURCE,
    labels_config: TopologyLabels = DEFAULT_LABELS,
) -> ObservedNode:
    metadata = require(raw, "metadata", (dict,), "node")
    name = require(metadata, "name", (str,), "node")
    status = require(raw, "status", (dict,), f"node {name}")
    spec = raw.get("spec") or {}
    labels = metadata.get("labels") or {}
    taints = tuple(Taint(t["key"], t.get("value") or "", t.get("effect") or "") for t in spec.get("taints") or ())
    ready = _condition(raw, "Ready")
    cordoned = bool(spec.get("unschedulable"))
    pressures = tuple(
        c["type"] for c in status.get("conditions") or () if c.get("type") != "Ready" and c.get("status") == "True"
    )
    blocking = [t for t in taints if t.effect in ("NoSchedule", "NoExecute") and t.key not in TOLERATED_TAINTS]
    is_ready = ready.get("status") == "True"
    return ObservedNode(
        name=name,
        orchestrator=orchestrator,
        gpu_total=quantity((status.get("allocatable") or {}).get(resource)),
        gpu_allocated=allocated,
        gpu_model=labels_config.first(labels, labels_config.gpu_model),
        nvlink_domain=labels_config.first(labels, labels_config.nvlink_domain) or name,
        leaf_switch=labels_config.first(labels, labels_config.leaf_switch),
        spine=labels_config.first(labels, labels_config.spine),
        state="ready" if is_ready else "notready" if ready else "unknown",
        state_flags=(("cordoned",) if cordoned else ()) + pressures,
        reason="" if is_ready else str(ready.get("message") or ready.get("reason") or ""),
        labels=dict(labels),
        taints=taints,
        cordoned=cordoned,
        schedulable=is_ready and not cordoned and not blocking,
    )


def parse_queue(raw: dict[str, Any], *, orchestrator: str, resource: str = GPU_RESOURCE) -> ObservedQueue:
    spec = raw.get("spec") or {}
    capability = (spec.get("capability") or {}).get(resource)
    guarantee = ((spec.get("guarantee") or {}).get("resource") or {}).get(resource)
    return ObservedQueue(
        name=require(require(raw, "metadata", (dict,), "queue"), "name", (str,), "queue"),
        orchestrator=orchestrator,
        kind="volcano_queue",
        state=str((raw.get("status") or {}).get("state") or ""),
        weight=float(spec.get("weight") or 0),
        guaranteed_gpus=quantity(guarantee) if guarantee is not None else None,
        capability_gpus=quantity(capability) if capability is not None else None,
        reclaimable=spec.get("reclaimable"),
    )


def _pending_reason(pods: list[dict[str, Any]], podgroup: dict[str, Any] | None) -> str:
    """The scheduler's own words: the PodGroup's Unschedulable condition, else a pod's PodScheduled."""
    if podgroup:
        unschedulable = _condition(podgroup, "Unschedulable")
        if unschedulable.get("status") == "True":
            return f"{unschedulable.get('reason', '')}: {unschedulable.get('message', '')}".strip(": ")
    for pod in pods:
        scheduled = _condition(pod, "PodScheduled")
        if scheduled.get("status") == "False":
            return f"{scheduled.get('reason', '')}: {scheduled.get('message', '')}".strip(": ")
    if podgroup:
        return str((podgroup.get("status") or {}).get("phase") or "")
    return "not yet seen by a scheduler"


def _pod_state(pod: dict[str, Any]) -> WorkloadState | None:
    phase = (pod.get("status") or {}).get("phase")
    if phase in ("Succeeded", "Failed"):
        return None
    if (pod.get("spec") or {}).get("nodeName"):
        return WorkloadState.RUNNING  # bound: holds its GPUs even while images pull
    return WorkloadState.PENDING


def _workload(
    key: str,
    pods: list[dict[str, Any]],
    podgroup: dict[str, Any] | None,
    *,
    orchestrator: str,
    teams: TeamMapping,
    resource: str,
) -> ObservedWorkload | None:
    live = [p for p in pods if _pod_state(p) is not None]
    gpus = [pod_gpus(p, resource) for p in live]
    states = {_pod_state(p) for p in live}
    if podgroup is not None:
        phase = (podgroup.get("status") or {}).get("phase")
        state = PODGROUP_STATES.get(str(phase))
        min_member = int((podgroup.get("spec") or {}).get("minMember") or 1)
        members = max(len(live), min_member)
        min_gpus = quantity(((podgroup.get("spec") or {}).get("minResources") or {}).get(resource))
        per_member = max(gpus, default=0) or min_gpus / max(min_member, 1)
    else:
        state = WorkloadState.RUNNING if WorkloadState.RUNNING in states else WorkloadState.PENDING
        members, per_member = len(live), max(gpus, default=0)
    if state is None or not live or per_member == 0:
        return None
    first = (podgroup or live[0])["metadata"]
    labels = {**(live[0]["metadata"].get("labels") or {}), **(first.get("labels") or {})}
    owners = {o.get("kind") for p in live for o in p["metadata"].get("ownerReferences") or ()}
    started = [t for p in live if (t := epoch((p.get("status") or {}).get("startTime")))]
    annotations = live[0]["metadata"].get("annotations") or {}
    return ObservedWorkload(
        external_id=key,
        orchestrator=orchestrator,
        team=teams.k8s_team(first.get("namespace", ""), labels),
        user=str(labels.get(teams.k8s_user_label, "")),
        name=str(first.get("name", "")),
        state=state,
        gang_size=members,
        gpus_per_member=float(per_member),
        kind=WorkloadKind.INFERENCE
        if owners & SERVICE_OWNERS
        else WorkloadKind.TRAINING
        if members > 1
        else WorkloadKind.BATCH,
        priority=int((live[0].get("spec") or {}).get("priority") or 0),
        submitted_at=epoch(first.get("creationTimestamp")),
        started_at=min(started) if state is WorkloadState.RUNNING and started else None,
        nodes=tuple(dict.fromkeys(n for p in live if (n := (p.get("spec") or {}).get("nodeName")))),
        pending_reason="" if state is WorkloadState.RUNNING else _pending_reason(live, podgroup),
        queue=str(
            ((podgroup or {}).get("spec") or {}).get("queue") or annotations.get("scheduling.volcano.sh/queue-name", "")
        ),
    )


def build_snapshot(
    name: str,
    *,
    nodes: Iterable[dict[str, Any]],
    pods: Iterable[dict[str, Any]],
    queues: Iterable[dict[str, Any]] = (),
    podgroups: Iterable[dict[str, Any]] = (),
    teams: TeamMapping = DEFAULT_TEAMS,
    labels_config: TopologyLabels = DEFAULT_LABELS,
    resource: str = GPU_RESOURCE,
    errors: tuple[str, ...] = (),
    taken_at: datetime | None = None,
) -> Snapshot:
    """Parse listed items (every page already joined) into a snapshot (pure; tests and benchmark)."""
    allocated: dict[str, int] = defaultdict(int)
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    pending = 0
    for pod in pods:
        metadata = require(pod, "metadata", (dict,), "pod")
        gpus = pod_gpus(pod, resource)
        state = _pod_state(pod)
        if not gpus or state is None:
            continue
        node = (pod.get("spec") or {}).get("nodeName")
        if node:
            allocated[node] += gpus
        else:
            pending += gpus
        group = (metadata.get("annotations") or {}).get(GROUP_ANNOTATION)
        key = f"{metadata.get('namespace')}/{group}" if group else f"{metadata.get('namespace')}/pod/{metadata['name']}"
        groups[key].append(pod)
    by_group = {f"{g['metadata'].get('namespace')}/{g['metadata']['name']}": g for g in podgroups}
    context = {"orchestrator": name, "teams": teams, "resource": resource}
    workloads = tuple(
        w for key, members in groups.items() if (w := _workload(key, members, by_group.get(key), **context)) is not None
    )
    observed_nodes = tuple(
        parse_node(
            n,
            allocated.get(n.get("metadata", {}).get("name", ""), 0),
            orchestrator=name,
            resource=resource,
            labels_config=labels_config,
        )
        for n in nodes
    )
    return Snapshot(
        orchestrator_name=name,
        kind=OrchestratorKind.KUBERNETES,
        taken_at=taken_at or datetime.now(UTC),
        nodes=observed_nodes,
        workloads=workloads,
        queues=tuple(parse_queue(q, orchestrator=name, resource=resource) for q in queues),
        pending_gpus=float(pending),
        errors=errors,
    )


def _api_error(what: str, exc: ApiException) -> SourceUnavailable:
    status = exc.status or 0
    # 410: the continue token expired mid-list; listing again from the start can succeed.
    retryable = status >= 500 or status in (410, 429) or status == 0
    return SourceUnavailable(
        f"kubernetes: list {what} -> HTTP {status} {exc.reason}", retryable=retryable, status=status or None
    )


class KubernetesCollector:
    """Reads nodes, pods and (when installed) Volcano Queues/PodGroups through ``api_client``
    (a ``kubernetes.client.ApiClient`` built from a kubeconfig or the in-cluster config)."""

    def __init__(
        self,
        api_client: k8s.ApiClient,
        *,
        name: str = "kubernetes",
        teams: TeamMapping = DEFAULT_TEAMS,
        labels_config: TopologyLabels = DEFAULT_LABELS,
        resource: str = GPU_RESOURCE,
        page_size: int = 500,
        volcano: bool = True,
        retry: RetryPolicy = DEFAULT_RETRY,
        breaker: CircuitBreaker | None = None,
        timeout: float = 30.0,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.name = name
        self.core = k8s.CoreV1Api(api_client)
        self.custom = k8s.CustomObjectsApi(api_client)
        self.teams, self.labels_config, self.resource = teams, labels_config, resource
        self.page_size, self.volcano, self.timeout = page_size, volcano, timeout
        self.retry, self.breaker, self.sleep = retry, breaker, sleep

    def collect(self) -> Snapshot:
        return guarded(self.breaker, self.name, self._collect)

    def _collect(self) -> Snapshot:
        taken_at = datetime.now(UTC)
        nodes = self.list_all("nodes", self.core.list_node)
        pods = self.list_all(
            "pods",
            self.core.list_pod_for_all_namespaces,
            slim=partial(slim_pod, resource=self.resource),
            field_selector="status.phase!=Succeeded,status.phase!=Failed",
        )
        queues: list[dict[str, Any]] = []
        podgroups: list[dict[str, Any]] = []
        errors: tuple[str, ...] = ()
        if self.volcano:
            try:
                queues = self.list_all("queues", self.custom.list_cluster_custom_object, *VOLCANO, "queues")
                podgroups = self.list_all("podgroups", self.custom.list_cluster_custom_object, *VOLCANO, "podgroups")
            except SourceUnavailable as exc:
                if exc.status != 404:
                    raise
                errors = ("volcano CRDs not installed: no queues or pod groups",)
        return build_snapshot(
            self.name,
            nodes=nodes,
            pods=pods,
            queues=queues,
            podgroups=podgroups,
            teams=self.teams,
            labels_config=self.labels_config,
            resource=self.resource,
            errors=errors,
            taken_at=taken_at,
        )

    def list_all(
        self, what: str, call: Callable[..., Any], *args: Any, slim: Slimmer | None = None, **kwargs: Any
    ) -> list[dict[str, Any]]:
        """Every item of a list call, all pages or nothing (retried from the first page). ``slim`` cuts
        each item down as its page arrives, so 150,000 pods never sit in memory whole."""
        return with_retries(lambda: self._pages(what, call, *args, slim=slim, **kwargs), self.retry, self.sleep)

    def _pages(
        self, what: str, call: Callable[..., Any], *args: Any, slim: Slimmer | None = None, **kwargs: Any
    ) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        token: str | None = None
        while True:
            page = self._page(what, call, *args, _continue=token, **kwargs)
            rows = require(page, "items", (list,), what)
            items.extend(rows if slim is None else (s for row in rows if (s := slim(row)) is not None))
            token = (page.get("metadata") or {}).get("continue") or None
            if not token:
                return items

    def _page(self, what: str, call: Callable[..., Any], *args: Any, **kwargs: Any) -> dict[str, Any]:
        if kwargs.get("_continue") is None:
            kwargs.pop("_continue")
        try:
            response = call(
                *args, limit=self.page_size, _preload_content=False, _request_timeout=self.timeout, **kwargs
            )
            try:
                body = response.data
            finally:
                response.release_conn()  # unpreloaded responses keep their connection until released
        except ApiException as exc:
            raise _api_error(what, exc) from exc
        except (Urllib3Error, OSError) as exc:
            raise SourceUnavailable(f"kubernetes: list {what} failed: {exc}") from exc
        try:
            page = json.loads(body)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise MalformedResponse(f"kubernetes: {what} page is not whole JSON ({exc})") from exc
        if not isinstance(page, dict):
            raise MalformedResponse(f"kubernetes: {what} page is not an object")
        return page
