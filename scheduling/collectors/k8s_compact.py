"""Objects kept by a watch cache, with what they share with others stored once (issue 35 item 1: ≤ 300 MB).

A decoded pod is ~50 objects and 3.1 kB, though most of it repeats across pods: the namespace, phase, scheduler
and service account, the node name, the labels and annotations of a job, its containers' resources, the status
conditions of every pod waiting or running alike, and the start and creation second of a gang's members.
:class:`PodCompactor` rebuilds each pod as it enters the cache so those parts are one shared object; what stays
per pod is its name, uid and the four small Structs that hold them (0.47 kB at 150,000 pods). Volcano PodGroups
(1.2 kB each) and nodes are compacted the same way. A compacted object is equal to the decoded one (``==``): only
identity changes, and every reader treats the Structs and their lists and dicts as read-only.

The shared values live in one table keyed by value. Its size follows what is cached, not what was ever seen: it
starts again whenever it holds more than twice the cache's objects (the pods already compacted keep their shared
parts; only sharing with pods yet to come restarts), so a watch that runs for months does not grow it.
"""

from __future__ import annotations

import sys
from collections.abc import Hashable
from typing import Any, TypeVar

from . import k8s_wire as wire

T = TypeVar("T")
MIN_TABLE = 4096
intern = sys.intern


class Unchanged:
    """Caches an object as it was decoded (Volcano Queues: a few dozen at most)."""

    def __call__(self, obj: T) -> T:
        return obj

    def fit(self, cached: int) -> None:
        pass


class Compactor(Unchanged):
    """The table of shared values, and the object metadata every compacted kind carries."""

    def __init__(self) -> None:
        self._shared: dict[Hashable, Any] = {}

    def fit(self, cached: int) -> None:
        """Start the table again when it outgrew the cache (``cached``: the number of objects cached now)."""
        if len(self._shared) > max(MIN_TABLE, 2 * cached):
            self._shared = {}

    def _meta(self, meta: wire.ObjectMeta) -> wire.ObjectMeta:
        one = self._shared.setdefault
        labels, owners, created = meta.labels, meta.ownerReferences, meta.creationTimestamp
        return wire.ObjectMeta(
            meta.name,
            intern(meta.namespace),
            meta.uid,
            one(("labels", *labels.items()), labels),  # empty ones too: msgspec gives each object its own
            one(meta.annotations, meta.annotations),
            one(("owners", *owners), owners),
            intern(created) if created else created,
        )

    def _resources(self, kind: str, amounts: dict[str, wire.Quantity]) -> dict[str, wire.Quantity]:
        return self._shared.setdefault((kind, *amounts.items()), amounts)


class PodCompactor(Compactor):
    def __call__(self, pod: wire.Pod) -> wire.Pod:  # type: ignore[override]
        # Positional Struct arguments and the table's own setdefault: this runs for every pod of a first list.
        spec, status = pod.spec, pod.status
        return wire.Pod(
            self._meta(pod.metadata),
            wire.PodSpec(
                intern(spec.nodeName),
                intern(spec.serviceAccountName),
                intern(spec.schedulerName),
                spec.priority,
                self._containers(spec.containers),
                self._containers(spec.initContainers),
            ),
            self._shared.setdefault(("status", status.phase, status.startTime, *status.conditions), status),
        )

    def _containers(self, containers: list[wire.Container]) -> list[wire.Container]:
        key = ("containers", *((*c.resources.requests.items(), "|", *c.resources.limits.items()) for c in containers))
        return self._shared.setdefault(key, containers)


class PodGroupCompactor(Compactor):
    def __call__(self, group: wire.PodGroup) -> wire.PodGroup:  # type: ignore[override]
        spec, status = group.spec, group.status
        if spec is not None:
            resources = (*spec.minResources.items(),) if spec.minResources is not None else None
            spec = self._shared.setdefault(("group spec", spec.minMember, resources, spec.queue), spec)
        if status is not None:
            conditions = (*status.conditions,) if status.conditions is not None else None
            status = self._shared.setdefault(("group status", status.phase, conditions), status)
        return wire.PodGroup(self._meta(group.metadata), spec, status)


class NodeCompactor(Compactor):
    def __call__(self, node: wire.Node) -> wire.Node:  # type: ignore[override]
        status, labels = node.status, node.metadata.labels
        shared_labels = {intern(key): intern(value) for key, value in labels.items()}
        return wire.Node(
            wire.ClusterMeta(node.metadata.name, shared_labels),
            wire.NodeStatus(
                self._resources("allocatable", status.allocatable),
                self._shared.setdefault(("conditions", *status.conditions), status.conditions),
            ),
            self._shared.setdefault(("node spec", node.spec.unschedulable, *node.spec.taints), node.spec),
        )
