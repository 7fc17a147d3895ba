"""Entitlements (queues): the rules a team tree must satisfy, and audited edits to it.

Rules, each reported against the field it concerns:
- ``weight`` is a percentage in [0, 100], and the children of one parent sum to at most 100 % per GPU model;
- ``guaranteed`` is at most ``burst_limit``;
- real GPUs can serve every top-level guarantee and live quota grant at once, across GPU models
  (``engine.promises``: an edit may not create or deepen a shortfall; one it does not touch does not block it);
- a sub-team's guarantees sum to at most its parent's guarantee for that model.
"""

from collections import defaultdict
from dataclasses import dataclass
from decimal import Decimal

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from scheduling.models import Queue, Team

from . import governance_trigger, versions
from .audit import require_reason, stamp_author
from .capacity import guarantee_shortfalls, lock_capacity


@dataclass(frozen=True)
class QueueChange:
    team: Team
    gpu_model: str
    weight: Decimal
    guaranteed: int
    burst_limit: int
    # The queue's version the edit was made on (form field, If-Match); None: not checked (services/versions.py).
    seen_version: int | None = None


def _field_error(queue: Queue, field: str, message: str) -> ValidationError:
    return ValidationError({field: f"{queue.team.slug}/{queue.gpu_model or 'any'}: {message}"})


def check_queue(queue: Queue) -> None:
    if queue.weight is None or not (0 <= queue.weight <= 100):
        raise _field_error(queue, "weight", "weight must be a percentage between 0 and 100.")
    if queue.guaranteed > queue.burst_limit:
        raise _field_error(
            queue,
            "guaranteed",
            f"guaranteed ({queue.guaranteed}) must not exceed the burst limit ({queue.burst_limit}).",
        )


def check_tree(queues: list[Queue], edited: frozenset[tuple[int, str]] = frozenset()) -> None:
    """Check the whole tree as it would be after a change (``queues`` = every queue, edited or not). A rule
    broken by a group of siblings is reported on the one the admin edited (``edited``: team id and GPU
    model), not on a sibling they left alone."""
    for queue in queues:
        check_queue(queue)
    by_parent: dict[tuple[int | None, str], list[Queue]] = defaultdict(list)
    by_team = {(q.team_id, q.gpu_model): q for q in queues}
    for queue in queues:
        by_parent[(queue.team.parent_id, queue.gpu_model)].append(queue)
    for (parent_id, model), siblings in by_parent.items():
        blamed = next((q for q in reversed(siblings) if (q.team_id, q.gpu_model) in edited), siblings[-1])
        total_weight = sum((q.weight for q in siblings), Decimal(0))
        if total_weight > 100:
            names = ", ".join(f"{q.team.slug} {q.weight}%" for q in siblings)
            raise _field_error(
                blamed,
                "weight",
                f"weights of one parent's children sum to {total_weight}% ({names}); at most 100%.",
            )
        guaranteed = sum(q.guaranteed for q in siblings)
        parent = by_team.get((parent_id, model))  # None for top-level teams: their guarantees are promises
        if parent is not None and guaranteed > parent.guaranteed:
            raise _field_error(
                blamed,
                "guaranteed",
                f"sub-teams' guarantees sum to {guaranteed} GPUs, more than their parent's {parent.guaranteed}.",
            )
    _check_promises(queues)


def _check_promises(queues: list[Queue]) -> None:
    """Top-level guarantees are promises like grants: real GPUs must serve them all at once, per model."""
    found = guarantee_shortfalls(queues, timezone.now())
    if found:
        worst = max(found, key=lambda s: s.short)
        raise ValidationError(
            {"guaranteed": f"top-level guarantees plus live grants cannot all be served: {worst.sentence()}."}
        )


@transaction.atomic
def apply_queue_changes(changes: list[QueueChange], *, by, reason: str) -> list[Queue]:
    """Apply several entitlement edits at once: all of them or none, each audited with who and why."""
    reason = require_reason(reason)
    lock_capacity()  # approvals check guarantees under this lock: an edit must not slip between check and grant
    existing = {(q.team_id, q.gpu_model): q for q in Queue.objects.select_for_update().select_related("team")}
    _require_seen_versions(changes, existing)
    touched: list[Queue] = []
    for change in changes:
        queue = existing.get((change.team.pk, change.gpu_model)) or Queue(team=change.team, gpu_model=change.gpu_model)
        queue.weight, queue.guaranteed, queue.burst_limit = change.weight, change.guaranteed, change.burst_limit
        existing[(change.team.pk, change.gpu_model)] = queue
        touched.append(queue)
    check_tree(list(existing.values()), edited=frozenset((c.team.pk, c.gpu_model) for c in changes))
    for queue in touched:
        stamp_author(queue, by=by, reason=reason)
        queue.save()
    governance_trigger.request_round()  # shares and caps reach Slurm and Volcano in seconds
    return touched


def _require_seen_versions(changes: list[QueueChange], locked: dict) -> None:
    """All or nothing: one stale row refuses the whole save, naming every row that moved on and how."""
    stale = []
    for change in changes:
        queue = locked.get((change.team.pk, change.gpu_model))
        if queue is None:
            continue
        try:
            versions.require_version(queue, change.seen_version, f"{queue.team.slug}/{queue.gpu_model or 'any'}")
        except versions.StaleVersion as error:
            stale.append(error)
    if stale:
        raise versions.StaleVersion.combined(stale)


def set_queue(team: Team, *, gpu_model: str = "", weight, guaranteed: int, burst_limit: int, by, reason: str) -> Queue:
    change = QueueChange(team, gpu_model, Decimal(str(weight)), guaranteed, burst_limit)
    return apply_queue_changes([change], by=by, reason=reason)[0]
