"""cluster-autoscaler's gRPC expander messages to the engine's ``GrowthOption`` and back.

A request carries, per option, the node group, how many nodes it would add and the pending pods it would help
(``podBytes``: serialized v1.Pod; ``pod`` before autoscaler 1.35), and per node group its template node
(``nodeBytesMap``, before 1.35 ``nodeMap``). Only the fields in ``k8s_subset.proto`` are read.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from google.protobuf.message import DecodeError

from scheduling.collectors.verbs import POOL_LABEL
from scheduling.engine.expander import GrowthOption, PodAsk
from scheduling.expander_protocol import expander_pb2, k8s_subset_pb2

GPU_RESOURCE = "nvidia.com/gpu"
GPU_MODEL_LABEL = "nvidia.com/gpu.product"

_QUANTITY = re.compile(r"^([+-]?[0-9.]+)([a-zA-Z]*)$")
_SUFFIX = {"": 1.0, "m": 1e-3, "k": 1e3, "M": 1e6, "G": 1e9, "Ki": 2.0**10, "Mi": 2.0**20, "Gi": 2.0**30}


class BadRequest(ValueError):
    """The request cannot be read: which field and why."""


def quantity(text: str) -> float:
    """A Kubernetes resource quantity as a number ("8", "500m", "1k"); GPU counts are whole in practice."""
    match = _QUANTITY.match(text.strip())
    if match is None or match.group(2) not in _SUFFIX:
        raise BadRequest(f"quantity {text!r} is not a Kubernetes quantity (digits and one of {sorted(_SUFFIX)})")
    return float(match.group(1)) * _SUFFIX[match.group(2)]


def _resource(resources: k8s_subset_pb2.ResourceRequirements, name: str) -> float:
    for amounts in (resources.limits, resources.requests):  # extended resources: the limit is the request
        if name in amounts:
            return quantity(amounts[name].string)
    return 0.0


def pod_gpus(pod: k8s_subset_pb2.Pod, resource: str = GPU_RESOURCE) -> float:
    """GPUs a pod asks: its containers' sum, or its largest init container's if that is more (as the scheduler
    counts)."""
    spec = pod.spec
    main = sum(_resource(c.resources, resource) for c in spec.containers)
    init = max((_resource(c.resources, resource) for c in spec.initContainers), default=0.0)
    return max(main, init)


def _parse(message_type: type, blob: bytes, field: str) -> object:
    message = message_type()
    try:
        message.ParseFromString(blob)
    except DecodeError as err:
        raise BadRequest(f"{field}: not a serialized {message_type.__name__} ({err})") from err
    return message


def option_pods(option: expander_pb2.Option) -> list[k8s_subset_pb2.Pod]:
    pods = list(option.pod)
    for index, blob in enumerate(option.podBytes):
        pod = _parse(k8s_subset_pb2.Pod, blob, f"options[{option.nodeGroupId}].podBytes[{index}]")
        assert isinstance(pod, k8s_subset_pb2.Pod)
        pods.append(pod)
    return pods


def template_node(request: expander_pb2.BestOptionsRequest, group: str) -> k8s_subset_pb2.Node | None:
    if group in request.nodeBytesMap:
        node = _parse(k8s_subset_pb2.Node, request.nodeBytesMap[group], f"nodeBytesMap[{group}]")
        assert isinstance(node, k8s_subset_pb2.Node)
        return node
    return request.nodeMap.get(group)


def growth_options(
    request: expander_pb2.BestOptionsRequest, default_pool: str, resource: str = GPU_RESOURCE,
) -> list[GrowthOption]:
    """Each option as the engine reads it; a template without the pool label joins ``default_pool``."""
    found = []
    for index, option in enumerate(request.options):
        if not option.nodeGroupId:
            raise BadRequest(f"options[{index}].nodeGroupId is empty: every option names its node group")
        node = template_node(request, option.nodeGroupId)
        labels = dict(node.metadata.labels) if node is not None else {}
        capacity = node.status.capacity if node is not None else {}
        per_node = quantity(capacity[resource].string) if resource in capacity else 0.0
        pods = tuple(
            PodAsk(pod_gpus(pod, resource), pod.spec.priority) for pod in option_pods(option)
        )
        found.append(GrowthOption(
            option.nodeGroupId, max(0, option.nodeCount), int(per_node), labels.get(POOL_LABEL) or default_pool,
            labels.get(GPU_MODEL_LABEL, ""), pods,
        ))
    return found


def response(request: expander_pb2.BestOptionsRequest, chosen: Sequence[str]) -> expander_pb2.BestOptionsResponse:
    """The chosen options, best first, copied from the request (cluster-autoscaler matches them by node group)."""
    by_group = {option.nodeGroupId: option for option in request.options}
    reply = expander_pb2.BestOptionsResponse()
    reply.options.extend(_copies(by_group[group] for group in chosen if group in by_group))
    return reply


def _copies(options: Iterable[expander_pb2.Option]) -> list[expander_pb2.Option]:
    # Echo only the identifying fields: the pods' bytes are not needed back and can be megabytes.
    return [expander_pb2.Option(nodeGroupId=o.nodeGroupId, nodeCount=o.nodeCount, debug=o.debug) for o in options]
