"""Kubernetes + Volcano collector: the official client -> :class:`Snapshot`.

Lists are read page by page (``limit``/``continue``) as raw bytes (``_preload_content=False``) and
decoded straight into the few fields we read (:mod:`.k8s_wire`): the client's model objects, or plain
``json.loads`` dicts, would cost far more time and memory for 150,000 pods. A page that fails, is not
whole JSON or has a mistyped field, or a ``continue`` token that expires (HTTP 410), fails the whole
list: there is no half snapshot.
"""

from __future__ import annotations

import dataclasses
import functools
import time
from collections import defaultdict
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from typing import Any

import msgspec
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException
from urllib3.exceptions import HTTPError as Urllib3Error

from scheduling.engine.governance_types import TEAM_LABEL as GOVERNANCE_TEAM_LABEL
from scheduling.engine.label_selector import SelectorError
from scheduling.engine.owners import USER_LABEL, kubernetes_claims
from scheduling.engine.types import OrchestratorKind, WorkloadKind

from . import conditions
from . import k8s_wire as wire
from .errors import MalformedResponse, SourceUnavailable
from .k8s_admission import Admission, pod_scopes
from .reliability import DEFAULT_RETRY, CircuitBreaker, RetryPolicy, guarded, with_retries
from .snapshot import (
    DEFAULT_LABELS,
    DEFAULT_TEAMS,
    AdmissionGap,
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
VOLCANO = ("scheduling.volcano.sh", "v1beta1")
SERVICE_OWNERS = frozenset({"ReplicaSet", "StatefulSet", "Deployment"})
# Taints a GPU pod is expected to tolerate (the device plugin's own); any other NoSchedule/NoExecute
# taint keeps new work off the node, which is how the portal drains it.
TOLERATED_TAINTS = frozenset({GPU_RESOURCE})
# The unbound members of a group that already runs some (elastic jobs) wait as their own workload;
# ":" cannot occur in a Kubernetes name, so this id never meets a real group's or pod's.
PENDING_REMAINDER = ":pending"
TERMINATED_PHASES = frozenset({"Succeeded", "Failed"})
# The MutatingWebhookConfiguration of deploy/k8s/admission.yaml; its creation time says since when every
# GPU pod it is sent (its rules and selectors: k8s_admission) should carry the portal's decision.
ADMISSION_WEBHOOK = "gpuportal-admission"


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


def _container_gpus(container: wire.Container, resource: str) -> int:
    resources = container.resources
    requested = resources.requests.get(resource)
    return quantity(requested if requested is not None else resources.limits.get(resource))


def pod_gpus(pod: wire.Pod | dict[str, Any], resource: str = GPU_RESOURCE) -> int:
    """GPUs a pod holds: the larger of its app containers' sum and its largest init container
    (init containers run one at a time, before the app containers)."""
    spec = pod.spec if isinstance(pod, wire.Pod) else wire.as_wire(pod.get("spec") or {}, wire.PodSpec, "pod spec")
    app = sum(_container_gpus(c, resource) for c in spec.containers)
    init = max((_container_gpus(c, resource) for c in spec.initContainers), default=0)
    return max(app, init)


def blocking_taints(taints: Iterable[Taint]) -> list[Taint]:
    """Taints that keep GPU work off a node (the portal's own tolerated ones aside)."""
    return [t for t in taints if t.effect in ("NoSchedule", "NoExecute") and t.key not in TOLERATED_TAINTS]


def _condition(conditions: Iterable[wire.Condition] | None, kind: str) -> wire.Condition | None:
    return next((c for c in conditions or () if c.type == kind), None)


def parse_node(
    raw: wire.Node | dict[str, Any],
    allocated: int,
    *,
    orchestrator: str,
    resource: str = GPU_RESOURCE,
    labels_config: TopologyLabels = DEFAULT_LABELS,
) -> ObservedNode:
    node = wire.as_wire(raw, wire.Node, "node")
    name, labels = node.metadata.name, node.metadata.labels
    taints = tuple(Taint(t.key, t.value, t.effect) for t in node.spec.taints)
    ready = _condition(node.status.conditions, "Ready")
    cordoned = node.spec.unschedulable
    pressures = tuple(str(c.type) for c in node.status.conditions if c.type != "Ready" and c.status == "True")
    blocking = blocking_taints(taints)
    ready_status = None if ready is None else str(ready.status)
    is_ready = ready_status == "True"
    return ObservedNode(
        name=name,
        orchestrator=orchestrator,
        gpu_total=quantity(node.status.allocatable.get(resource)),
        gpu_allocated=allocated,
        gpu_model=labels_config.first(labels, labels_config.gpu_model),
        nvlink_domain=labels_config.first(labels, labels_config.nvlink_domain) or name,
        leaf_switch=labels_config.first(labels, labels_config.leaf_switch),
        spine=labels_config.first(labels, labels_config.spine),
        state=conditions.kubernetes_state(ready_status),
        state_flags=(("cordoned",) if cordoned else ()) + pressures,
        reason="" if is_ready or ready is None else str(ready.message or ready.reason or ""),
        labels=dict(labels),
        taints=taints,
        cordoned=cordoned,
        schedulable=is_ready and not cordoned and not blocking,
        condition=conditions.kubernetes_condition(ready_status, cordoned, bool(blocking), allocated),
    )


def parse_queue(raw: wire.Queue | dict[str, Any], *, orchestrator: str, resource: str = GPU_RESOURCE) -> ObservedQueue:
    queue = wire.as_wire(raw, wire.Queue, "queue")
    spec = queue.spec or wire.QueueSpec()
    capability = (spec.capability or {}).get(resource)
    guarantee = ((spec.guarantee or wire.Guarantee()).resource or {}).get(resource)
    return ObservedQueue(
        name=queue.metadata.name,
        orchestrator=orchestrator,
        kind="volcano_queue",
        state=str((queue.status or wire.QueueStatus()).state or ""),
        weight=float(spec.weight or 0),
        guaranteed_gpus=quantity(guarantee) if guarantee is not None else None,
        capability_gpus=quantity(capability) if capability is not None else None,
        reclaimable=spec.reclaimable,
    )


def _reason(condition: wire.Condition) -> str:
    return f"{condition.reason or ''}: {condition.message or ''}".strip(": ")


def _pending_reason(pods: list[wire.Pod], podgroup: wire.PodGroup | None) -> str:
    """The scheduler's own words: the PodGroup's Unschedulable condition, else a pod's PodScheduled."""
    status = (podgroup.status if podgroup else None) or wire.PodGroupStatus()
    unschedulable = _condition(status.conditions, "Unschedulable")
    if unschedulable is not None and unschedulable.status == "True":
        return _reason(unschedulable)
    for pod in pods:
        scheduled = _condition(pod.status.conditions, "PodScheduled")
        if scheduled is not None and scheduled.status == "False":
            return _reason(scheduled)
    if podgroup:
        return str(status.phase or "")
    return "not yet seen by a scheduler"


Member = tuple[wire.Pod, int]  # a live GPU pod and the GPUs it holds


def _group_workloads(
    key: str,
    members: list[Member],
    podgroup: wire.PodGroup | None,
    *,
    orchestrator: str,
    teams: TeamMapping,
    resource: str,
    admission: Admission | None = None,
) -> list[ObservedWorkload]:
    """One group's workloads, by the counting rule: its bound members run (they hold GPUs on their
    nodes), its unbound members wait. A group with both (a Volcano elastic job that got more than
    ``minMember`` but not all its pods placed) is two workloads, the waiting part ``<key>:pending``.
    The group's phase decides nothing: Volcano's ``Running`` says ``minMember`` are placed, not all."""
    spec = (podgroup.spec if podgroup else None) or wire.PodGroupSpec()
    bound = [m for m in members if m[0].spec.nodeName]
    unbound = [m for m in members if not m[0].spec.nodeName]
    min_member = int(spec.minMember or 1)
    min_gpus = quantity((spec.minResources or {}).get(resource))
    gang_size = max(len(members), min_member) if podgroup is not None else len(members)
    context = {
        "orchestrator": orchestrator,
        "teams": teams,
        "podgroup": podgroup,
        "total": gang_size,
        "admission": admission,
    }
    workloads = []
    if bound:
        workloads.append(_workload(key, bound, WorkloadState.RUNNING, len(bound), **context))
    if unbound:
        waiting = len(unbound) if bound else gang_size
        per_member_default = min_gpus / max(min_member, 1)
        workloads.append(
            _workload(
                key + PENDING_REMAINDER if bound else key,
                unbound,
                WorkloadState.PENDING,
                waiting,
                per_member_default=per_member_default,
                **context,
            )
        )
    return [w for w in workloads if w.gpus_per_member > 0]


def _workload(
    key: str,
    members: list[Member],
    state: WorkloadState,
    size: int,
    *,
    orchestrator: str,
    teams: TeamMapping,
    podgroup: wire.PodGroup | None,
    total: int,
    per_member_default: float = 0.0,
    admission: Admission | None = None,
) -> ObservedWorkload:
    pods = [pod for pod, _gpus in members]
    first_pod = pods[0]
    meta = podgroup.metadata if podgroup is not None else first_pod.metadata
    labels = {**first_pod.metadata.labels, **meta.labels}
    owners = {o.kind for pod in pods for o in pod.metadata.ownerReferences}
    running = state is WorkloadState.RUNNING
    started = [t for pod in pods if (t := epoch(pod.status.startTime))] if running else []
    queue = ((podgroup.spec if podgroup else None) or wire.PodGroupSpec()).queue
    claims = kubernetes_claims(
        labels, meta.namespace, first_pod.spec.serviceAccountName, label_keys=(USER_LABEL, teams.k8s_user_label)
    )
    return ObservedWorkload(
        external_id=key,
        orchestrator=orchestrator,
        team=teams.k8s_team(meta.namespace, labels),
        user=claims[0].name if claims else "",
        claims=claims,
        name=meta.name,
        state=state,
        gang_size=size,
        gpus_per_member=float(max((gpus for _pod, gpus in members), default=0) or per_member_default),
        kind=WorkloadKind.INFERENCE
        if owners & SERVICE_OWNERS
        else WorkloadKind.TRAINING
        if total > 1
        else WorkloadKind.BATCH,
        priority=int(first_pod.spec.priority or 0),
        submitted_at=epoch(meta.creationTimestamp),
        started_at=min(started) if started else None,
        nodes=tuple(dict.fromkeys(pod.spec.nodeName for pod in pods if pod.spec.nodeName)),
        pending_reason="" if running else _pending_reason(pods, podgroup),
        queue=str(queue or first_pod.metadata.annotations.queue),
        scheduler=first_pod.spec.schedulerName,
        admission_gaps=admission_gaps(pods, admission),
    )


def admission_gaps(pods: Iterable[wire.Pod], admission: Admission | None) -> tuple[AdmissionGap, ...]:
    """The pods created since the webhook was registered (``admission``; ``None``: it is not, or we could not
    tell) that it would have been sent and that bear no decision of it. A pod created in the second the webhook
    was registered counts: creation times have whole seconds, and the API server calls a webhook as soon as its
    configuration is stored."""
    if admission is None:
        return ()
    return tuple(
        AdmissionGap(pod.metadata.namespace, pod.metadata.name, pod.metadata.uid, created)
        for pod in pods
        if not pod.metadata.annotations.decision
        and (created := epoch(pod.metadata.creationTimestamp)) is not None
        and created >= admission.since
        and admission.sent(pod)
    )


def pod_group_key(pod: wire.Pod) -> str:
    meta = pod.metadata
    group = meta.annotations.group
    return f"{meta.namespace}/{group}" if group else f"{meta.namespace}/pod/{meta.name}"


def member_name(member: Member) -> str:
    return str(member[0].metadata.name)


def gpus_counter(resource: str) -> Callable[[wire.Pod], int]:
    """A pod's GPUs depend on its containers only: counted once per pair of container lists while the pods
    are alive (one per pod as decoded; one per shape of pod once a watch cache shares equal lists,
    k8s_compact). For one round: an id is only known to mean the same list while that list is held."""
    counted: dict[tuple[int, int], tuple[list[wire.Container], list[wire.Container], int]] = {}

    def gpus(pod: wire.Pod) -> int:
        apps, inits = pod.spec.containers, pod.spec.initContainers
        key = (id(apps), id(inits))
        kept = counted.get(key)
        if kept is None:
            kept = counted[key] = (apps, inits, pod_gpus(pod, resource))
        return kept[2]

    return gpus


def counted_gpus(pod: wire.Pod, gpus_of: Callable[[wire.Pod], int]) -> int:
    """The GPUs a pod counts for: none once it has ended."""
    return 0 if pod.status.phase in TERMINATED_PHASES else gpus_of(pod)


def group_pods(
    pods: Iterable[wire.Pod | dict[str, Any]], gpus_of: Callable[[wire.Pod], int]
) -> tuple[dict[str, int], int, dict[str, list[Member]]]:
    """GPUs allocated per node, GPUs waiting, and each group's members (ordered by pod name, so a gang's first
    pod does not depend on the order pods were listed or changed in)."""
    allocated: dict[str, int] = defaultdict(int)
    groups: dict[str, list[Member]] = defaultdict(list)
    pending = 0
    for raw in pods:
        pod = wire.as_wire(raw, wire.Pod, "pod")
        gpus = counted_gpus(pod, gpus_of)
        if not gpus:
            continue
        if pod.spec.nodeName:
            allocated[pod.spec.nodeName] += gpus
        else:
            pending += gpus
        groups[pod_group_key(pod)].append((pod, gpus))
    for members in groups.values():
        members.sort(key=member_name)
    return allocated, pending, groups


def build_snapshot(
    name: str,
    *,
    nodes: Iterable[wire.Node | dict[str, Any]],
    pods: Iterable[wire.Pod | dict[str, Any]],
    queues: Iterable[wire.Queue | dict[str, Any]] = (),
    podgroups: Iterable[wire.PodGroup | dict[str, Any]] = (),
    teams: TeamMapping = DEFAULT_TEAMS,
    labels_config: TopologyLabels = DEFAULT_LABELS,
    resource: str = GPU_RESOURCE,
    errors: tuple[str, ...] = (),
    taken_at: datetime | None = None,
    admission: Admission | None = None,
) -> Snapshot:
    """Parse listed items (every page already joined; decoded Structs or plain dicts) into a snapshot
    (pure; tests and benchmark). ``admission``: the portal's admission webhook as registered (``None`` when it
    is not, or was not readable), for each workload's ``admission_gaps``. A watch cache's rounds build theirs
    from what changed since the last (k8s_rounds)."""
    allocated, pending, groups = group_pods(pods, gpus_counter(resource))
    by_group = {namespaced_key(g): g for g in (wire.as_wire(g, wire.PodGroup, "podgroup") for g in podgroups)}
    context = GangContext(name, teams, resource, admission)
    workloads = tuple(w for key, members in groups.items() for w in context.workloads(key, members, by_group.get(key)))
    observed_nodes = tuple(
        parse_node(n, allocated.get(node_name(n), 0), orchestrator=name, resource=resource, labels_config=labels_config)
        for n in (wire.as_wire(n, wire.Node, "node") for n in nodes)
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


def namespaced_key(obj: wire.PodGroup | wire.Pod) -> str:
    """A namespaced object's key (a watch cache's); a PodGroup's is its members' group key."""
    return f"{obj.metadata.namespace}/{obj.metadata.name}"


def pod_key(pod: wire.Pod) -> str:
    """A pod's key in a watch cache: its uid (a string the pod holds anyway; 150,000 keys of "namespace/name"
    cost 13 MB), its namespaced name where it has none (pods written by hand in tests)."""
    return pod.metadata.uid or namespaced_key(pod)


def node_name(node: wire.Node) -> str:
    return str(node.metadata.name)


@dataclasses.dataclass(frozen=True)
class GangContext:
    """What a gang's workloads are derived with besides its members and PodGroup (equal contexts: equal
    workloads from the same objects)."""

    orchestrator: str
    teams: TeamMapping
    resource: str
    admission: Admission | None

    def workloads(self, key: str, members: list[Member], podgroup: wire.PodGroup | None) -> list[ObservedWorkload]:
        return _group_workloads(
            key,
            members,
            podgroup,
            orchestrator=self.orchestrator,
            teams=self.teams,
            resource=self.resource,
            admission=self.admission,
        )


def _api_error(what: str, exc: ApiException) -> SourceUnavailable:
    status = exc.status or 0
    # 410: the continue token expired mid-list; listing again from the start can succeed.
    retryable = status >= 500 or status in (410, 429) or status == 0
    return SourceUnavailable(
        f"kubernetes: {what} -> HTTP {status} {exc.reason}", retryable=retryable, status=status or None
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
        admission_webhook: str = ADMISSION_WEBHOOK,
    ) -> None:
        self.name = name
        self.core = k8s.CoreV1Api(api_client)
        self.registrations = k8s.AdmissionregistrationV1Api(api_client)
        self.admission_webhook = admission_webhook
        self.custom = k8s.CustomObjectsApi(api_client)
        self.teams, self.labels_config, self.resource = teams, labels_config, resource
        self.page_size, self.volcano, self.timeout = page_size, volcano, timeout
        self.retry, self.breaker, self.sleep = retry, breaker, sleep

    def collect(self) -> Snapshot:
        return guarded(self.breaker, self.name, self._collect)

    def _collect(self) -> Snapshot:
        taken_at = datetime.now(UTC)
        nodes = self.list_all("nodes", self.core.list_node, kind=wire.NodeList)
        pods = self.list_all(
            "pods",
            self.core.list_pod_for_all_namespaces,
            kind=wire.PodList,
            keep=lambda pod: pod_gpus(pod, self.resource) > 0,
            field_selector="status.phase!=Succeeded,status.phase!=Failed",
        )
        queues: list[Any] = []
        podgroups: list[Any] = []
        errors: tuple[str, ...] = ()
        if self.volcano:
            custom = self.custom.list_cluster_custom_object
            try:
                queues = self.list_all("queues", custom, *VOLCANO, "queues", kind=wire.QueueList)
                podgroups = self.list_all("podgroups", custom, *VOLCANO, "podgroups", kind=wire.PodGroupList)
            except SourceUnavailable as exc:
                if exc.status != 404:
                    raise
                errors = ("volcano CRDs not installed: no queues or pod groups",)
        context, admission_error = self.gang_context()
        return build_snapshot(
            self.name,
            nodes=nodes,
            pods=pods,
            queues=queues,
            podgroups=podgroups,
            teams=context.teams,
            labels_config=self.labels_config,
            resource=self.resource,
            errors=errors + admission_error,
            taken_at=taken_at,
            admission=context.admission,
        )

    def gang_context(self) -> tuple[GangContext, tuple[str, ...]]:
        """This round's context of every gang's workloads (the admission webhook read now), and the error that
        kept the webhook from being read."""
        admission, admission_error = self.admission()
        teams = with_labelled_namespaces(self.teams, admission)
        return GangContext(self.name, teams, self.resource, admission), admission_error

    def admission(self) -> tuple[Admission | None, tuple[str, ...]]:
        """The portal's MutatingWebhookConfiguration as "admission bypassed" judges it: when it was created,
        which pods its webhooks are sent, every namespace's labels (``None`` when there is none, or no name is
        configured), and the error that kept us from knowing. Unreadable (RBAC, a failing API server, a garbled
        answer) or not understood (a selector the API server would refuse) means no bypass is reported this round,
        never a false one; the snapshot's errors say so."""
        try:
            config = self._admission_config()
            since = epoch(config.metadata.creationTimestamp) if config else None
            if config is None or since is None:
                return None, ()
            webhooks = pod_scopes(config)
            # No webhook is sent pods: no pod can be a bypass, and the namespaces need not be listed.
            labels = self._namespace_labels() if webhooks else {}
        except (SourceUnavailable, MalformedResponse) as exc:  # findings wait; the round's nodes and pods do not
            return None, (f"{exc}: admission bypasses not checked",)
        except SelectorError as exc:
            return None, (
                f"kubernetes: admission webhook {self.admission_webhook}: {exc}: admission bypasses not checked",
            )
        return Admission(since, webhooks, labels), ()

    def _admission_config(self) -> wire.WebhookConfiguration | None:
        if not self.admission_webhook:
            return None
        try:
            body = self._raw(
                "read",
                "admission webhook",
                self.registrations.read_mutating_webhook_configuration,
                self.admission_webhook,
            )
        except SourceUnavailable as exc:
            if exc.status == 404:  # not registered: pods made before the webhook exists are no bypasses
                return None
            raise
        config: wire.WebhookConfiguration = wire.decode("admission webhook", body, _decoder(wire.WebhookConfiguration))
        return config

    def _namespace_labels(self) -> dict[str, dict[str, str]]:
        """Every namespace's labels as served, once per round (the API server adds ``kubernetes.io/metadata.name``
        itself from 1.21 on, and matches selectors against exactly these)."""
        namespaces = self.list_all("namespaces", self.core.list_namespace, kind=wire.NamespaceList)
        return {namespace.metadata.name: namespace.metadata.labels for namespace in namespaces}

    def list_all(
        self,
        what: str,
        call: Callable[..., Any],
        *args: Any,
        kind: type[wire.AnyList],
        keep: Callable[[Any], bool] | None = None,
        **kwargs: Any,
    ) -> list[Any]:
        """Every item of a list call, all pages or nothing (retried from the first page). Items are
        decoded straight into ``kind``'s Structs; ``keep`` drops items as their page arrives, so the
        150,000 pods of a large cluster never sit in memory whole."""
        page_decoder = _decoder(kind)
        return with_retries(
            lambda: self._pages(what, call, *args, page_decoder=page_decoder, keep=keep, **kwargs),
            self.retry,
            self.sleep,
        )

    def _pages(
        self,
        what: str,
        call: Callable[..., Any],
        *args: Any,
        page_decoder: msgspec.json.Decoder[Any],
        keep: Callable[[Any], bool] | None = None,
        **kwargs: Any,
    ) -> list[Any]:
        items: list[Any] = []
        token: str | None = None
        while True:
            page = wire.decode(what, self._page(what, call, *args, _continue=token, **kwargs), page_decoder)
            items.extend(page.items if keep is None else filter(keep, page.items))
            token = page.metadata.continue_ or None
            if not token:
                return items

    def _page(self, what: str, call: Callable[..., Any], *args: Any, **kwargs: Any) -> bytes:
        """The raw bytes of one page (``_preload_content=False``: the official client's model
        deserialisation is skipped)."""
        if kwargs.get("_continue") is None:
            kwargs.pop("_continue")
        return self._raw("list", what, call, *args, limit=self.page_size, **kwargs)

    def _raw(self, verb: str, what: str, call: Callable[..., Any], *args: Any, **kwargs: Any) -> bytes:
        try:
            response = call(*args, _preload_content=False, _request_timeout=self.timeout, **kwargs)
            try:
                return bytes(response.data)
            finally:
                response.release_conn()  # unpreloaded responses keep their connection until released
        except ApiException as exc:
            raise _api_error(f"{verb} {what}", exc) from exc
        except (Urllib3Error, OSError) as exc:
            raise SourceUnavailable(f"kubernetes: {verb} {what} failed: {exc}") from exc


@functools.cache
def _decoder(kind: type[Any]) -> msgspec.json.Decoder[Any]:
    """One decoder per list type (building one compiles the type's schema)."""
    return msgspec.json.Decoder(kind)


def with_labelled_namespaces(teams: TeamMapping, admission: Admission | None) -> TeamMapping:
    """``teams`` with the namespaces labelled ``gpuportal.io/team`` (governance writes it on the namespaces it
    maps; an admin may set it on their own) as that team's, when this round listed the namespaces (it does
    when the webhook is registered). The explicit mapping wins over a label."""
    if admission is None:
        return teams
    labelled = {
        name: labels[GOVERNANCE_TEAM_LABEL]
        for name, labels in admission.namespace_labels.items()
        if labels.get(GOVERNANCE_TEAM_LABEL)
    }
    if not labelled:
        return teams
    return dataclasses.replace(teams, namespace_teams={**labelled, **teams.namespace_teams})
