"""Entitlements (queues): the rules a team tree must satisfy, and audited edits to it.

Rules, each reported against the field it concerns:
- ``weight`` is a percentage in [0, 100], and the children of one parent sum to at most 100 % per GPU model;
- ``guaranteed`` is at most ``burst_limit``;
- real GPUs can serve every promise (the guarantees no ancestor's queue of the same GPU model holds: top-level
  teams', and a sub-team's whose parents guarantee only other models) and live quota grant at once, across GPU
  models (``engine.promises``: an edit may not create or deepen a shortfall; one it does not touch does not block it);
- the guarantees carved out of an ancestor's queue (the nearest of the same GPU model) sum to at most its guarantee;
- the team tree has no cycle, and a re-parented team's queues obey all of the above in their new place.
"""

from collections import defaultdict
from dataclasses import dataclass
from decimal import Decimal

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from scheduling.models import Queue, Team

from . import governance_trigger
from .audit import require_reason, stamp_author
from .capacity import Parents, carving_queue, guarantee_shortfalls, lock_capacity, team_parents


@dataclass(frozen=True)
class QueueChange:
    team: Team
    gpu_model: str
    weight: Decimal
    guaranteed: int
    burst_limit: int


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


def check_tree(
    queues: list[Queue], edited: frozenset[tuple[int, str]] = frozenset(), parents: Parents | None = None
) -> None:
    """Check the whole tree as it would be after a change (``queues`` = every queue, edited or not; ``parents``:
    team id -> parent id after it, by default as stored with the queues' teams' parents on top). A rule broken
    by a group of siblings is reported on the one the admin edited (``edited``: team id and GPU model), not on
    a sibling they left alone."""
    for queue in queues:
        check_queue(queue)
    parents = team_parents(queues) if parents is None else parents
    _check_weights(queues, edited, parents)
    _check_carved_guarantees(queues, edited, parents)
    _check_promises(queues, parents)


def _blamed(group: list[Queue], edited: frozenset[tuple[int, str]]) -> Queue:
    return next((q for q in reversed(group) if (q.team_id, q.gpu_model) in edited), group[-1])


def _check_weights(queues: list[Queue], edited: frozenset[tuple[int, str]], parents: Parents) -> None:
    """Weights are shares of the parent's share: one parent's children sum to at most 100 % per GPU model."""
    by_parent: dict[tuple[int | None, str], list[Queue]] = defaultdict(list)
    for queue in queues:
        by_parent[(parents.get(queue.team_id), queue.gpu_model)].append(queue)
    for siblings in by_parent.values():
        total_weight = sum((q.weight for q in siblings), Decimal(0))
        if total_weight > 100:
            names = ", ".join(f"{q.team.slug} {q.weight}%" for q in siblings)
            raise _field_error(
                _blamed(siblings, edited),
                "weight",
                f"weights of one parent's children sum to {total_weight}% ({names}); at most 100%.",
            )


def _check_carved_guarantees(queues: list[Queue], edited: frozenset[tuple[int, str]], parents: Parents) -> None:
    """A sub-team's guarantee is carved out of the nearest ancestor's queue of its GPU model: those carved out
    of one queue sum to at most its guarantee. (One with no such queue above it is a promise: _check_promises.)"""
    by_team = {(q.team_id, q.gpu_model): q for q in queues}
    carved: dict[tuple[int, str], list[Queue]] = defaultdict(list)
    for queue in queues:
        holder = carving_queue(queue, by_team, parents)
        if holder is not None:
            carved[(holder.team_id, holder.gpu_model)].append(queue)
    for key, group in carved.items():
        holder, guaranteed = by_team[key], sum(q.guaranteed for q in group)
        if guaranteed > holder.guaranteed:
            raise _field_error(
                _blamed(group, edited),
                "guaranteed",
                f"sub-teams' guarantees sum to {guaranteed} GPUs, more than their parent's {holder.guaranteed} "
                f"({holder}).",
            )


def _check_promises(queues: list[Queue], parents: Parents) -> None:
    """Guarantees no ancestor holds are promises like grants: real GPUs must serve them all at once, per model."""
    found = guarantee_shortfalls(queues, timezone.now(), parents)
    if found:
        worst = max(found, key=lambda s: s.short)
        raise ValidationError(
            {
                "guaranteed": "top-level guarantees (and sub-teams' no parent queue holds) plus live grants cannot "
                f"all be served: {worst.sentence()}."
            }
        )


@transaction.atomic
def apply_queue_changes(changes: list[QueueChange], *, by, reason: str) -> list[Queue]:
    """Apply several entitlement edits at once: all of them or none, each audited with who and why."""
    reason = require_reason(reason)
    lock_capacity()  # approvals check guarantees under this lock: an edit must not slip between check and grant
    existing = {(q.team_id, q.gpu_model): q for q in Queue.objects.select_for_update().select_related("team")}
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


def set_queue(team: Team, *, gpu_model: str = "", weight, guaranteed: int, burst_limit: int, by, reason: str) -> Queue:
    change = QueueChange(team, gpu_model, Decimal(str(weight)), guaranteed, burst_limit)
    return apply_queue_changes([change], by=by, reason=reason)[0]
