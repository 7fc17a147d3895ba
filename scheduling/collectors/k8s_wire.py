"""The fields of the Kubernetes and Volcano objects the collector reads, as msgspec Structs.

A 150,000-pod list is ~500 MB of JSON (managed fields, env, volumes, images...). Decoding it into
dicts (``json.loads``) or into the official client's models costs tens of seconds; decoding it
straight into these Structs skips every field not named here without building it, ~10x faster and
a fraction of the memory. The JSON is still read whole: a truncated or garbled page, or a field of
the wrong type, fails the decode with the path of the bad field (``$.items[3].spec.nodeName``).

Core objects are typed as the apiserver serialises them (Go ``omitempty``: optional fields are left
out, never ``null``); Volcano's custom objects are stored as their clients wrote them, so their
optional fields also accept ``null``.
"""

from __future__ import annotations

from typing import Any, TypeVar

import msgspec

from .errors import MalformedResponse

GROUP_ANNOTATION = "scheduling.k8s.io/group-name"
QUEUE_ANNOTATION = "scheduling.volcano.sh/queue-name"
# Set by the portal's admission webhook on every GPU pod it routes (services/admission.py): a pod in a
# team namespace without it was created while the webhook did not answer ("admission bypassed").
DECISION_ANNOTATION = "scheduler.gpuportal.io/decision"

# Extended-resource quantities are JSON strings ("8") from the apiserver; hand-written objects may
# carry numbers. ``k8s.quantity`` turns either into whole GPUs or refuses it.
Quantity = str | int | float


class Wire(msgspec.Struct, frozen=True, gc=False):
    """Base: immutable, and untracked by the cycle collector (150,000 pods would make every GC pass slow)."""


class Condition(Wire):
    type: str | None = None
    status: str | None = None
    reason: str | None = None
    message: str | None = None


class OwnerReference(Wire):
    kind: str = ""


class Annotations(Wire):
    """Only the annotations the collector reads; others (often large: last-applied configs) are skipped."""

    group: str = msgspec.field(default="", name=GROUP_ANNOTATION)
    queue: str = msgspec.field(default="", name=QUEUE_ANNOTATION)
    decision: str = msgspec.field(default="", name=DECISION_ANNOTATION)


class ObjectMeta(Wire):
    name: str
    namespace: str = ""
    uid: str = ""
    labels: dict[str, str] = {}
    annotations: Annotations = Annotations()
    ownerReferences: list[OwnerReference] = []
    creationTimestamp: str | None = None


class Resources(Wire):
    requests: dict[str, Quantity] = {}
    limits: dict[str, Quantity] = {}


class Container(Wire):
    resources: Resources = Resources()


class PodSpec(Wire):
    nodeName: str = ""
    serviceAccountName: str = ""
    schedulerName: str = ""
    priority: int | None = None
    containers: list[Container] = []
    initContainers: list[Container] = []


class PodStatus(Wire):
    phase: str = ""
    startTime: str | None = None
    conditions: list[Condition] = []


class Pod(Wire):
    metadata: ObjectMeta
    spec: PodSpec = PodSpec()
    status: PodStatus = PodStatus()


class NodeTaint(Wire):
    key: str
    value: str = ""
    effect: str = ""


class NodeSpec(Wire):
    unschedulable: bool = False
    taints: list[NodeTaint] = []


class NodeStatus(Wire):
    allocatable: dict[str, Quantity] = {}
    conditions: list[Condition] = []


class ClusterMeta(Wire):
    """A cluster-scoped object's name and labels (nodes, namespaces)."""

    name: str
    labels: dict[str, str] = {}


class Node(Wire):
    metadata: ClusterMeta
    status: NodeStatus
    spec: NodeSpec = NodeSpec()


class PodGroupSpec(Wire):
    minMember: int | None = None
    minResources: dict[str, Quantity] | None = None
    queue: str | None = None


class PodGroupStatus(Wire):
    phase: str | None = None
    conditions: list[Condition] | None = None


class PodGroup(Wire):
    metadata: ObjectMeta
    spec: PodGroupSpec | None = None
    status: PodGroupStatus | None = None


class Guarantee(Wire):
    resource: dict[str, Quantity] | None = None


class QueueSpec(Wire):
    weight: float | None = None
    capability: dict[str, Quantity] | None = None
    guarantee: Guarantee | None = None
    reclaimable: bool | None = None


class QueueStatus(Wire):
    state: str | None = None


class QueueMeta(Wire):
    name: str


class Queue(Wire):
    metadata: QueueMeta
    spec: QueueSpec | None = None
    status: QueueStatus | None = None


class SelectorRequirement(Wire):
    key: str
    operator: str
    values: list[str] = []


class LabelSelector(Wire):
    matchLabels: dict[str, str] = {}
    matchExpressions: list[SelectorRequirement] = []


class WebhookRule(Wire):
    """A ``RuleWithOperations``; ``scope`` is defaulted to ``*`` by the API server."""

    operations: list[str] = []
    apiGroups: list[str] = []
    apiVersions: list[str] = []
    resources: list[str] = []
    scope: str = "*"


class MutatingWebhook(Wire):
    name: str = ""
    namespaceSelector: LabelSelector = LabelSelector()
    objectSelector: LabelSelector = LabelSelector()
    rules: list[WebhookRule] = []


class WebhookConfiguration(Wire):
    """A MutatingWebhookConfiguration: when it was registered (pods created since then should carry the
    portal's decision) and which pods its webhooks are sent (rules and selectors)."""

    metadata: ObjectMeta
    webhooks: list[MutatingWebhook] = []


class Namespace(Wire):
    metadata: ClusterMeta


class ListMeta(Wire):
    continue_: str = msgspec.field(default="", name="continue")
    resourceVersion: str = ""


class PodList(Wire):
    items: list[Pod]
    metadata: ListMeta = ListMeta()


class NodeList(Wire):
    items: list[Node]
    metadata: ListMeta = ListMeta()


class PodGroupList(Wire):
    items: list[PodGroup]
    metadata: ListMeta = ListMeta()


class QueueList(Wire):
    items: list[Queue]
    metadata: ListMeta = ListMeta()


class NamespaceList(Wire):
    items: list[Namespace]
    metadata: ListMeta = ListMeta()


AnyList = PodList | NodeList | PodGroupList | QueueList | NamespaceList
T = TypeVar("T")


def decode(what: str, body: bytes, page_decoder: msgspec.json.Decoder[T]) -> T:
    """One list page, whole or refused: truncated or garbled JSON and mistyped fields raise."""
    try:
        return page_decoder.decode(body)
    except msgspec.ValidationError as exc:
        raise MalformedResponse(f"kubernetes: {what} page has a bad field: {exc}") from exc
    except msgspec.DecodeError as exc:
        raise MalformedResponse(f"kubernetes: {what} page is not whole JSON ({exc})") from exc


def as_wire(obj: Any, kind: type[T], what: str) -> T:
    """An object already decoded (a Struct) as it is; a dict (tests, recorded samples) converted."""
    if isinstance(obj, kind):
        return obj
    try:
        return msgspec.convert(obj, kind)
    except msgspec.ValidationError as exc:
        raise MalformedResponse(f"kubernetes: {what}: {exc}") from exc
