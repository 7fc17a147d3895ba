"""Apply a governance diff's changes through the writers, one change at a time, never stopping at the
first failure: each change gets its own result, so a partial apply is visible and the next round resumes
with what failed (the writers are idempotent, so what succeeded is simply unchanged next time).

Order matters for Slurm: parents before children and accounts before their users when creating, users
before accounts and children before parents when deleting (slurmdbd refuses to delete an account that
still has children or users).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from scheduling.engine.governance_state import Action, Change
from scheduling.engine.governance_types import (
    K8sNamespace,
    K8sPriorityClass,
    K8sResourceQuota,
    KueueClusterQueue,
    KueueLocalQueue,
    NativeObject,
    SlurmAccount,
    SlurmUser,
    VolcanoQueue,
)

from .errors import CollectorError
from .k8s_governance import KubernetesGovernance
from .slurm_accounting import SlurmAccountingWriter


@dataclass(frozen=True, slots=True)
class ApplyResult:
    id: str
    action: Action
    written: bool  # False: the orchestrator already held it (idempotent no-op), or it failed
    error: str = ""


def _run(change: Change, write: Callable[[], bool]) -> ApplyResult:
    try:
        return ApplyResult(change.id, change.action, write())
    except CollectorError as exc:
        return ApplyResult(change.id, change.action, False, str(exc))


def _depth(obj: NativeObject | None, parents: dict[str, str]) -> int:
    """How deep an account sits in the tree (users count one below their account)."""
    name = obj.name if isinstance(obj, SlurmAccount) else obj.account if isinstance(obj, SlurmUser) else ""
    depth = 1 if isinstance(obj, SlurmUser) else 0
    while name in parents and depth < 64:
        name, depth = parents[name], depth + 1
    return depth


def slurm_order(changes: Iterable[Change]) -> list[Change]:
    """Creates and updates top-down, then deletes bottom-up; unchanged ones are dropped."""
    todo = [c for c in changes if c.action is not Action.UNCHANGED]
    parents = {obj.name: obj.parent for c in todo for obj in (c.desired, c.observed) if isinstance(obj, SlurmAccount)}
    writes = sorted((c for c in todo if c.action is not Action.DELETE), key=lambda c: _depth(c.desired, parents))
    deletes = sorted((c for c in todo if c.action is Action.DELETE), key=lambda c: -_depth(c.observed, parents))
    return writes + deletes


def _slurm_write(writer: SlurmAccountingWriter, change: Change) -> Callable[[], bool] | None:
    if change.action is Action.DELETE:
        gone = change.observed
        if isinstance(gone, SlurmAccount):
            return lambda: writer.remove_account(gone.name)
        return (lambda: writer.remove_user(gone)) if isinstance(gone, SlurmUser) else None
    wanted = change.desired
    if isinstance(wanted, SlurmAccount):
        return lambda: writer.ensure_account(wanted)
    return (lambda: writer.ensure_user(wanted)) if isinstance(wanted, SlurmUser) else None


def _apply(changes: Iterable[Change], write_for: Callable[[Change], Callable[[], bool] | None]) -> list[ApplyResult]:
    results = []
    for change in changes:
        write = write_for(change)
        if write is None:
            results.append(ApplyResult(change.id, change.action, False, f"left alone: no writer {change.action}s it"))
        else:
            results.append(_run(change, write))
    return results


def apply_slurm(changes: Sequence[Change], writer: SlurmAccountingWriter) -> list[ApplyResult]:
    return _apply(slurm_order(changes), lambda change: _slurm_write(writer, change))


def _kubernetes_write(gov: KubernetesGovernance, change: Change) -> Callable[[], bool] | None:
    obj = change.desired if change.action is not Action.DELETE else change.observed
    deleting = change.action is Action.DELETE
    if isinstance(obj, K8sNamespace):
        # Namespaces are never deleted by governance: they hold the teams' workloads.
        return None if deleting else (lambda: gov.ensure_namespace(obj))
    if isinstance(obj, K8sPriorityClass):
        # Never deleted by governance: pods in the cluster may name it.
        return None if deleting else (lambda: gov.ensure_priority_class(obj))
    if isinstance(obj, K8sResourceQuota):
        return (lambda: gov.remove_quota(obj.namespace, obj.name)) if deleting else (lambda: gov.ensure_quota(obj))
    if isinstance(obj, VolcanoQueue):
        return (lambda: gov.remove_volcano_queue(obj.name)) if deleting else (lambda: gov.ensure_volcano_queue(obj))
    if isinstance(obj, KueueClusterQueue):
        if deleting:
            return lambda: gov.remove_kueue_cluster_queue(obj.name)
        return lambda: gov.ensure_kueue_cluster_queue(obj)
    if isinstance(obj, KueueLocalQueue) and not deleting:
        return lambda: gov.ensure_kueue_local_queue(obj)
    return None


# Namespaces first (quotas and local queues live in them), then cluster-wide queues, then the rest.
_K8S_ORDER = {
    K8sNamespace: 0, K8sPriorityClass: 0, VolcanoQueue: 1, KueueClusterQueue: 1, K8sResourceQuota: 2, KueueLocalQueue: 2
}


def apply_kubernetes(changes: Sequence[Change], gov: KubernetesGovernance) -> list[ApplyResult]:
    todo = [c for c in changes if c.action is not Action.UNCHANGED]
    todo.sort(key=lambda c: _K8S_ORDER.get(type(c.desired or c.observed), 3))
    return _apply(todo, lambda change: _kubernetes_write(gov, change))
