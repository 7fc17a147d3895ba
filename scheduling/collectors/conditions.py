"""Each orchestrator's node states read into one ``NodeCondition``: the only place that parses them.

Slurm says ``idle``/``mixed``/``allocated``/``down`` plus flags (``DRAIN``, ``NOT_RESPONDING``, ``MAINT``...),
Kubernetes a ``Ready`` condition plus ``spec.unschedulable`` and taints, Ray ``ALIVE``/``DEAD``. One function per
orchestrator turns them into a condition; the rest of the portal (ingest, the ledger, the rebalancer's verbs)
asks the condition. ``condition_of`` reads a node built by hand (tests, traces) that carries none.

Where a node takes no new work, DRAINING and DRAINED are told apart by its GPUs in use, as the portal stores
them (``Node.State``), not by the orchestrator's own word for it.
"""

from __future__ import annotations

from collections.abc import Iterable

from .snapshot import NodeCondition, ObservedNode

# A Slurm node carrying any of these flags takes no new work (sinfo shows it drained/failing/rebooting).
SLURM_UNSCHEDULABLE_FLAGS = frozenset(
    {"DRAIN", "FAIL", "MAINT", "NOT_RESPONDING", "POWERED_DOWN", "POWERING_DOWN", "REBOOT_ISSUED"}
)
SLURM_SCHEDULABLE_STATES = frozenset({"idle", "mixed", "allocated"})
SLURM_BUSY_STATES = frozenset({"mixed", "allocated"})
DOWN_WORDS = frozenset({"DOWN", "NOT_RESPONDING", "FAIL"})
PLANNED_FLAGS = frozenset({"PLANNED"})  # Slurm >= 23.02: idle nodes the backfill scheduler holds for a pending job


def _not_taking_work(gpu_allocated: int) -> NodeCondition:
    return NodeCondition.DRAINING if gpu_allocated else NodeCondition.DRAINED


# --- Slurm ----------------------------------------------------------------------------------------------


def slurm_state(base: str, flags: Iterable[str]) -> str:
    """sinfo's word: ``draining``/``drained`` for a drained node that is not down, else the base state."""
    if "DRAIN" in set(flags) and base != "down":
        return "draining" if base in SLURM_BUSY_STATES else "drained"
    return base


def slurm_schedulable(base: str, flags: Iterable[str]) -> bool:
    return base in SLURM_SCHEDULABLE_STATES and not SLURM_UNSCHEDULABLE_FLAGS.intersection(flags)


def slurm_condition(base: str, flags: Iterable[str], gpu_allocated: int) -> NodeCondition:
    """``base`` is Slurm's lower-case state, ``flags`` its upper-case state flags."""
    flags = frozenset(flags)
    if (flags | {slurm_state(base, flags).upper()}) & DOWN_WORDS:
        return NodeCondition.DOWN
    if "DRAIN" in flags or not slurm_schedulable(base, flags):
        if base == "unknown" and "DRAIN" not in flags:
            return NodeCondition.UNKNOWN
        return _not_taking_work(gpu_allocated)
    return NodeCondition.READY


def slurm_drain_requested(flags: Iterable[str]) -> bool:
    """The node carries Slurm's DRAIN flag: released by the rebalancer (or an admin)."""
    return "DRAIN" in set(flags)


def slurm_drained(base: str, flags: Iterable[str]) -> bool:
    """Drained in Slurm's words: IDLE+DRAIN or DOWN+DRAIN (MIXED/ALLOCATED+DRAIN while jobs still run)."""
    return base in ("idle", "down") and slurm_drain_requested(flags)


# --- Kubernetes -----------------------------------------------------------------------------------------


def kubernetes_state(ready: str | None) -> str:
    """``ready``/``notready``/``unknown`` from the Ready condition's status (None: no Ready condition)."""
    return "ready" if ready == "True" else "notready" if ready is not None else "unknown"


def kubernetes_condition(ready: str | None, cordoned: bool, blocked: bool, gpu_allocated: int) -> NodeCondition:
    """``ready`` is the Ready condition's status (None when absent); ``blocked``: a taint GPU work does not
    tolerate."""
    if ready is None:
        return NodeCondition.UNKNOWN
    if ready != "True":
        return NodeCondition.NOT_READY
    if cordoned or blocked:
        return _not_taking_work(gpu_allocated)
    return NodeCondition.READY


# --- Ray ------------------------------------------------------------------------------------------------


def ray_alive(state: str) -> bool:
    return state == "ALIVE"


def ray_condition(state: str, gpu_allocated: int) -> NodeCondition:
    """Ray says ALIVE or DEAD. A dead node is read as drained (no work, no GPU in use), as the portal has
    always stored it; it is not counted down."""
    return NodeCondition.READY if ray_alive(state) else _not_taking_work(gpu_allocated)


# --- any node -------------------------------------------------------------------------------------------


def condition_of(node: ObservedNode) -> NodeCondition:
    """The node's condition as its collector set it; for a node built by hand, read from its state, flags,
    ``cordoned`` and ``schedulable`` with the same rules."""
    if node.condition is not None:
        return node.condition
    words = {f.upper() for f in node.state_flags} | {node.state.upper()}
    if "NOTREADY" in words:
        return NodeCondition.NOT_READY
    if words & DOWN_WORDS:
        return NodeCondition.DOWN
    if "DRAIN" in words or node.cordoned or not node.schedulable:
        return NodeCondition.UNKNOWN if "UNKNOWN" in words else _not_taking_work(node.gpu_allocated)
    return NodeCondition.READY


def takes_work(node: ObservedNode) -> bool:
    return condition_of(node) is NodeCondition.READY


def is_planned(node: ObservedNode) -> bool:
    """Idle GPUs the scheduler keeps for a pending gang (Slurm's PLANNED flag)."""
    return bool(({f.upper() for f in node.state_flags} | {node.state.upper()}) & PLANNED_FLAGS)
