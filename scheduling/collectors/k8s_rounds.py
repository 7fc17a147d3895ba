"""A watch cache's rounds, each built from what changed since the last (issue 35 item 1).

Grouping 150,000 pods into gangs anew every round cost 0.4 s CPU though 1 % of them changed. :class:`WatchRounds`
keeps what the last round built — GPUs allocated per node, GPUs waiting, each gang's pods, PodGroup and workloads,
each node's view — and applies the round's changes as the watch recorded them (:class:`Changes`: each changed
key's object before and after). Only the gangs a changed pod or PodGroup belongs to are built again; every other
gang's workloads and every unchanged node's view are the very objects of the last round, which the ingest's round
memo recognises by identity (services/ingest.py).

It gives the snapshot :func:`.k8s.build_snapshot` gives from the same objects (a Hypothesis property,
tests/collectors/test_k8s_rounds.py). Whatever it cannot account for change by change — the first round, a list
read again (after a 410), a new gang context (team mapping, admission webhook), a round that failed half-way — is
built from every cached object, as a listing round is.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from scheduling.engine.types import OrchestratorKind

from . import k8s_wire as wire
from .k8s import (
    GangContext,
    Member,
    counted_gpus,
    gpus_counter,
    group_pods,
    member_name,
    namespaced_key,
    node_name,
    parse_node,
    parse_queue,
    pod_group_key,
    pod_key,
)
from .snapshot import ObservedNode, ObservedWorkload, Snapshot, TopologyLabels

Change = tuple[Any, Any]  # a key's object before the round's first change to it and after its last (None: absent)


@dataclass(frozen=True)
class Changes:
    """One watched list as a round reads it: every cached object, and each key changed since the last round
    (``None``: the list was read again, or never read by a round, so everything may have changed)."""

    items: list[Any]
    changed: Mapping[str, Change] | None


Gang = tuple[tuple[wire.Pod, ...], wire.PodGroup | None, list[ObservedWorkload]]


class WatchRounds:
    """Builds each round's snapshot of one watched cluster; one round at a time (the watch process's)."""

    def __init__(self, name: str, *, resource: str, labels_config: TopologyLabels) -> None:
        self.name, self.resource, self.labels_config = name, resource, labels_config
        self._context: GangContext | None = None  # None: nothing kept that a round can build on
        self._allocated: dict[str, int] = {}
        self._pending = 0
        self._gangs: dict[str, Gang] = {}
        self._podgroups: dict[str, wire.PodGroup] = {}
        self._nodes: dict[str, tuple[wire.Node, int, ObservedNode]] = {}
        self.whole_rounds = 0  # built from every object (the first, after a relist, a new context, a failure)

    def snapshot(
        self,
        *,
        nodes: list[wire.Node],
        pods: Changes,
        podgroups: Changes,
        queues: list[wire.Queue],
        context: GangContext,
        errors: tuple[str, ...],
        taken_at: datetime,
    ) -> Snapshot:
        try:
            if context != self._context or pods.changed is None or podgroups.changed is None:
                self._build_whole(pods.items, podgroups.items, context)
                self.whole_rounds += 1
            else:
                self._apply(pods.changed, podgroups.changed)
            observed_nodes = self._node_views(nodes)
        except BaseException:
            self._context = None  # half applied: the next round builds from every object
            raise
        return Snapshot(
            orchestrator_name=self.name,
            kind=OrchestratorKind.KUBERNETES,
            taken_at=taken_at,
            nodes=observed_nodes,
            workloads=tuple(w for _pods, _group, workloads in self._gangs.values() for w in workloads),
            queues=tuple(parse_queue(q, orchestrator=self.name, resource=self.resource) for q in queues),
            pending_gpus=float(self._pending),
            errors=errors,
        )

    def _build_whole(self, pods: list[wire.Pod], podgroups: list[wire.PodGroup], context: GangContext) -> None:
        self._context = None
        allocated, self._pending, groups = group_pods(pods, gpus_counter(self.resource))
        self._allocated = dict(allocated)
        self._podgroups = {namespaced_key(g): g for g in podgroups}
        self._gangs = {}
        for key, members in groups.items():
            self._keep_gang(key, members, context)
        self._context = context

    def _keep_gang(self, key: str, members: list[Member], context: GangContext) -> None:
        podgroup = self._podgroups.get(key)
        pods = tuple(pod for pod, _gpus in members)
        self._gangs[key] = (pods, podgroup, context.workloads(key, members, podgroup))

    def _apply(self, pods: Mapping[str, Change], podgroups: Mapping[str, Change]) -> None:
        """The round's changes: each changed pod's GPUs taken off where it was counted and put where it is now;
        the gangs of changed pods and PodGroups built again from their members now."""
        assert self._context is not None
        gpus_of = gpus_counter(self.resource)
        dirty: set[str] = set()
        for key, (_before, after) in podgroups.items():
            if after is None:
                self._podgroups.pop(key, None)
            else:
                self._podgroups[key] = after
            dirty.add(key)
        arrived: dict[str, list[Member]] = defaultdict(list)
        for before, after in pods.values():
            if before is not None and (gpus := counted_gpus(before, gpus_of)):
                self._count(before, -gpus)
                dirty.add(pod_group_key(before))
            if after is not None and (gpus := counted_gpus(after, gpus_of)):
                self._count(after, gpus)
                arrived[pod_group_key(after)].append((after, gpus))
                dirty.add(pod_group_key(after))
        for key in dirty:
            kept = self._gangs.get(key, ((), None, []))[0]
            members = [(pod, gpus_of(pod)) for pod in kept if pod_key(pod) not in pods]
            members += arrived.get(key, [])
            if members:
                members.sort(key=member_name)
                self._keep_gang(key, members, self._context)
            else:
                self._gangs.pop(key, None)

    def _count(self, pod: wire.Pod, gpus: int) -> None:
        node = pod.spec.nodeName
        if node:
            self._allocated[node] = self._allocated.get(node, 0) + gpus
        else:
            self._pending += gpus

    def _node_views(self, nodes: list[wire.Node]) -> tuple[ObservedNode, ...]:
        """Each node's view, the last round's very object where the node and its allocated GPUs are the same."""
        kept, self._nodes = self._nodes, {}
        views = []
        for node in nodes:
            name = node_name(node)
            allocated = self._allocated.get(name, 0)
            last = kept.get(name)
            if last is not None and last[0] is node and last[1] == allocated:
                view = last[2]
            else:
                view = parse_node(
                    node, allocated, orchestrator=self.name, resource=self.resource, labels_config=self.labels_config
                )
            self._nodes[name] = (node, allocated, view)
            views.append(view)
        return tuple(views)
