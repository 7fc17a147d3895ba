"""Why is my workload waiting, and what can I do: the orchestrator's raw reason read against the snapshot.

Slurm says ``AssocGrpGRES`` or ``Resources``, Kubernetes/Volcano ``Unschedulable``, Ray
``PENDING_NODE_ASSIGNMENT``: words that name a mechanism, not a next step. ``explain_wait`` checks, in
order, the causes a researcher can act on, and names the first that holds:

``quota_cap``   the team is at its GPU cap in this pool (or Slurm says so) -> request quota;
``held``        held by a user or an admin -> release it / ask an admin;
``dependency``  waits for another job -> nothing to do but wait for it;
``gpu_model``   no schedulable node offers the GPU model asked for -> ask for another model;
``too_large``   more GPUs than the pool holds (or one member larger than any node) -> split the job;
``topology``    a gang that must sit under one leaf switch, and no leaf has room -> relax topology;
``fragmented``  enough GPUs free, but not in blocks of the member's size -> a smaller shape starts sooner;
``host``        GPUs fit but CPU or memory per member does not -> ask for less CPU/memory;
``capacity``    not enough free GPUs -> wait for the estimated start;
``priority``    it fits now but work ahead of it goes first -> wait, position given;
``starting``    it fits now and nothing is ahead -> it starts at the next scheduling pass.

Each explanation carries the numbers behind the sentence and the start estimate of
``startplan.estimate_start`` (EASY backfill over the same snapshot) with the queue position.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field

from scheduling.engine._topology import topology_keys
from scheduling.engine.placement import ClusterState
from scheduling.engine.startplan import PoolSnapshot, StartEstimate, describe_wait, estimate_start
from scheduling.engine.types import Placement, Request, TopologyLevel
from scheduling.wording import plural

QUOTA_REASONS = frozenset({
    "AssocGrpGRES", "AssocGrpGRESMinutes", "AssocGrpGRESRunMinutes", "AssocMaxGRESPerJob",
    "QOSGrpGRES", "QOSGrpGRESMinutes", "QOSGrpGRESRunMinutes", "QOSMaxGRESPerUser", "AssocGrpJobsLimit",
    "QOSMaxJobsPerUserLimit", "AssocGrpCpuLimit", "QOSGrpCpuLimit",
})
HELD_REASONS = frozenset({"JobHeldUser", "JobHeldAdmin", "launch failed requeued held"})
DEPENDENCY_REASONS = frozenset({"Dependency", "DependencyNeverSatisfied"})

CODES = ("quota_cap", "held", "dependency", "gpu_model", "too_large", "topology", "fragmented", "host",
         "capacity", "priority", "starting")


@dataclass(frozen=True, slots=True)
class WaitExplanation:
    """A pending workload's wait, said as what to do, with the numbers and the start estimate behind it."""

    code: str
    message: str
    numbers: Mapping[str, float] = field(default_factory=dict)
    raw_reason: str = ""
    estimate: StartEstimate | None = None

    @property
    def asks_for_quota(self) -> bool:
        return self.code == "quota_cap"


def explain_wait(
    request: Request, pool: PoolSnapshot, *, now: float, raw_reason: str = "", cap_label: str = "",
    estimate: StartEstimate | None = None, state: ClusterState | None = None,
) -> WaitExplanation:
    """Explain why ``request`` (pending in ``pool``) waits; ``cap_label`` names the cap ("burst", ...).
    A caller explaining many jobs of one pool passes each one's ``estimate`` (``estimate_starts``: one backfill
    pass for all) and one ``state`` of the pool's nodes (read, never changed here)."""
    estimate = estimate or estimate_start(request, pool, now)
    code, message, numbers = _diagnose(request, pool, raw_reason.strip(), cap_label, state)
    if code in ("priority", "capacity", "fragmented", "topology", "host", "quota_cap"):
        message = f"{message}; {_estimate_phrase(estimate, now)}"
    numbers = {**numbers, "position": float(estimate.position), "ahead": float(estimate.ahead)}
    return WaitExplanation(code, message, numbers, raw_reason, estimate)


def _estimate_phrase(estimate: StartEstimate, now: float) -> str:
    wait = describe_wait(estimate.wait_s(now))
    place = f"#{estimate.position} in the {estimate.orchestrator} queue"
    if wait == "unknown":
        return f"{place}, start not predictable (running work has no known end)"
    return f"{place}, estimated start {'now' if wait == 'now' else 'in ' + wait}"


_Diagnosis = tuple[str, str, dict[str, float]]


def _diagnose(
    request: Request, pool: PoolSnapshot, raw: str, cap_label: str, state: ClusterState | None
) -> _Diagnosis:
    quota = _quota_cause(request, pool, raw, cap_label)
    if quota is not None:
        return quota
    if raw in HELD_REASONS:
        who = "an admin" if "Admin" in raw else "you (or a script)"
        return "held", f"held by {who}: release it (scontrol release) or ask an admin", {}
    if raw in DEPENDENCY_REASONS:
        never = raw == "DependencyNeverSatisfied"
        return "dependency", ("its dependency failed and will never be satisfied: cancel and resubmit" if never
                              else "waiting for the job it depends on to finish"), {}
    state = state or ClusterState(pool.nodes)
    attempt = state.place(request)
    if isinstance(attempt, Placement):
        return _fits_now(request, pool)
    return _shape_cause(request, state, attempt.constraint)


def _quota_cause(request: Request, pool: PoolSnapshot, raw: str, cap_label: str) -> _Diagnosis | None:
    cap = pool.team_cap.get(request.team)
    used = pool.team_in_use.get(request.team, 0.0)
    if raw not in QUOTA_REASONS and (cap is None or used + request.gpus <= cap):
        return None
    label = f" ({cap_label})" if cap_label else ""
    numbers = {"gpus_needed": request.gpus, "team_in_use": used}
    if cap is None:
        return "quota_cap", "your team is at its limit in this pool; request quota", numbers
    numbers["team_cap"] = cap
    return ("quota_cap", f"your team is at its GPU limit of {cap:g}{label}: {used:g} in use, this job needs"
            f" {request.gpus:g} more; request quota", numbers)


def _fits_now(request: Request, pool: PoolSnapshot) -> _Diagnosis:
    ahead = sum(1 for queued in pool.queue if queued.id != request.id and queued.priority >= request.priority)
    ahead_in_queue = next((i for i, queued in enumerate(pool.queue) if queued.id == request.id), ahead)
    if ahead_in_queue:
        return ("priority", f"the GPUs it needs are free, but {plural(ahead_in_queue, 'workload')} ahead of it "
                            f"{'goes' if ahead_in_queue == 1 else 'go'} first",
                {"gpus_needed": request.gpus})
    return "starting", "it fits now: it should start at the next scheduling pass", {"gpus_needed": request.gpus}


def _shape_cause(request: Request, state: ClusterState, constraint: str) -> _Diagnosis:
    nodes = [node for node in state.nodes() if node.schedulable
             and (not request.gpu_models or node.gpu_model in request.gpu_models)]
    need = request.gpus
    free_blocks = [node.gpu_free_whole for node in nodes]
    free = float(sum(free_blocks))
    largest = float(max(free_blocks, default=0))
    numbers = {"gpus_needed": need, "free_gpus": free, "largest_free_block": largest}
    if constraint == "gpu_model":
        wanted = ", ".join(sorted(request.gpu_models))
        return "gpu_model", f"no schedulable node offers {wanted}: ask for another GPU model", {"gpus_needed": need}
    biggest_node = max((node.gpu_total for node in nodes), default=0)
    total = sum(node.gpu_total for node in nodes)
    if need > total or (not request.gpu_milli and request.gpus_per_member > biggest_node):
        return ("too_large", f"needs {need:g} GPUs ({_shape(request)}) but the pool holds {total} on nodes of at"
                f" most {biggest_node}: split the job", {**numbers, "pool_gpus": float(total)})
    if constraint in ("cpu", "memory"):
        return ("host", f"GPUs are free but not the {constraint} each member asks for: ask for less {constraint}",
                numbers)
    if request.members > 1 and request.topology_required and request.topology is TopologyLevel.LEAF_SWITCH:
        best = _best_leaf_free(state, request)
        if free >= need:
            return ("topology", f"gang of {_shape(request)} needs {plural(need, 'GPU')} under one leaf switch;"
                    f" {best:g} free there (best leaf), {free:g} free in all", {**numbers, "best_leaf_free": best})
    if free >= need:
        return "fragmented", _fragmented_message(request, free, largest), numbers
    return "capacity", f"waiting for {plural(need, 'GPU')} ({_shape(request)}): {free:g} free in the pool", numbers


def _fragmented_message(request: Request, free: float, largest: float) -> str:
    if request.members == 1:
        return (f"waiting for {plural(request.gpus_per_member, 'GPU')} on one node: {free:g} free but fragmented,"
                f" the largest free block is {largest:g}")
    return (f"gang of {_shape(request)} needs {request.members} blocks of {request.gpus_per_member} GPUs:"
            f" {free:g} free but fragmented, the largest free block is {largest:g}")


def _best_leaf_free(state: ClusterState, request: Request) -> float:
    """Most free whole GPUs under any one leaf switch (over nodes of an allowed model)."""
    nodes = state.nodes()
    keys = topology_keys(nodes)[TopologyLevel.LEAF_SWITCH]
    per_leaf: dict[str, int] = defaultdict(int)
    for node, key in zip(nodes, keys, strict=True):
        if node.schedulable and (not request.gpu_models or node.gpu_model in request.gpu_models):
            per_leaf[key] += node.gpu_free_whole
    return float(max(per_leaf.values(), default=0))


def _shape(request: Request) -> str:
    if request.gpu_milli:
        return f"{request.members} × {request.gpu_milli / 1000:g} GPU"
    return f"{request.members} × {request.gpus_per_member}"
