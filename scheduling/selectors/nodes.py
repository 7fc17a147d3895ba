"""One node's page: its owner, the work running on it now, and its history (ownership changes with who and
why, the plans that moved or drained it).

Which jobs run on a node: collectors record a workload's hosts in ``Workload.nodes``, either as names or (the
demo) as ``{"node", "gpus"}`` per member. The database narrows the running work to rows whose JSON text names the
node (the same text on SQLite and PostgreSQL), and ``gpus_on`` reads each row exactly. Jobs the reader may not see
(``access.workloads_visible_to``) are summed into one unnamed figure, so the node's GPUs still add up.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from functools import reduce
from operator import or_

from django.db.models import Q, TextField
from django.db.models.functions import Cast
from django.shortcuts import get_object_or_404
from django.utils import timezone

from scheduling.models import Node, NodeMove, Workload, split_node_key
from scheduling.selectors.access import workloads_visible_to


@dataclass(frozen=True)
class JobOnNode:
    workload: Workload
    gpus: int  # on this node
    remaining_s: float | None  # until its time limit, when it has one


@dataclass(frozen=True)
class NodeJobs:
    shown: list[JobOnNode]
    hidden_gpus: int  # GPUs of work the reader may not see
    hidden_jobs: int

    @property
    def drain_cost_gpu_s(self) -> float:
        """GPU-seconds of the shown work left to run (what waiting for a drain costs, where limits are known)."""
        return sum(job.gpus * (job.remaining_s or 0.0) for job in self.shown)


def node_or_404(key: str) -> Node:
    """The node a page's URL names by its key (``Node.key``: ``dgx01``, or ``dgx01@site-b`` in another domain)."""
    domain, name = split_node_key(key)
    return get_object_or_404(Node.objects.select_related("orchestrator"), domain=domain, name=name)


def nodes_by_key(keys: Iterable[str]):
    """The nodes named by ``keys`` (``Node.key``), in no particular order; unknown keys are left out."""
    names: dict[str, set[str]] = defaultdict(set)
    for key in keys:
        domain, name = split_node_key(key)
        names[domain].add(name)
    if not names:
        return Node.objects.none()
    return Node.objects.filter(reduce(or_, (Q(domain=domain, name__in=sorted(n)) for domain, n in names.items())))


def gpus_on(workload: Workload, name: str) -> int:
    """GPUs ``workload`` holds on node ``name``: the demo's recorded GPU indices, else its members laid out
    round-robin over the hosts the collector recorded (how ``selectors.workloads`` lays them out)."""
    recorded = workload.nodes if isinstance(workload.nodes, list) else []
    if any(isinstance(item, dict) for item in recorded):
        members = [item for item in recorded if isinstance(item, dict) and item.get("node") == name]
        return sum(len(item.get("gpus") or ()) for item in members)
    hosts = [host for host in recorded if isinstance(host, str)]
    if name not in hosts:
        return 0
    members = sum(1 for member in range(workload.gang_size) if hosts[member % len(hosts)] == name)
    return members * workload.gpus_per_member


def jobs_on(node: Node, user) -> NodeJobs:
    running = (
        Workload.objects.filter(state=Workload.State.RUNNING, orchestrator_id=node.orchestrator_id)
        .annotate(nodes_text=Cast("nodes", TextField()))
        .filter(nodes_text__contains=json.dumps(node.name))
        .select_related("team", "orchestrator")
        .order_by("started_at", "pk")
    )
    visible = set(workloads_visible_to(user, running).values_list("pk", flat=True))
    now = timezone.now()
    shown, hidden_gpus, hidden_jobs = [], 0, 0
    for workload in running:
        gpus = gpus_on(workload, node.name)
        if not gpus:
            continue  # the name appeared inside another value
        if workload.pk not in visible:
            hidden_gpus, hidden_jobs = hidden_gpus + gpus, hidden_jobs + 1
            continue
        remaining = None
        if workload.started_at and workload.duration_estimate_s:
            remaining = max(0.0, workload.duration_estimate_s - (now - workload.started_at).total_seconds())
        shown.append(JobOnNode(workload, gpus, remaining))
    return NodeJobs(shown, hidden_gpus, hidden_jobs)


def ownership_history(node: Node, limit: int = 50) -> list:
    """The node's audited changes (owner, pinning, topology), newest first, with who and why."""
    return list(node.history.select_related("history_user", "orchestrator").order_by("-history_date")[:limit])


def plans_of(node: Node, limit: int = 20) -> list[NodeMove]:
    """The rebalance plans (moves and drains) that named the node, newest first."""
    moves = NodeMove.objects.filter(node=node).select_related("plan", "source", "target")
    return list(moves.order_by("-plan__created_at", "-pk")[:limit])
