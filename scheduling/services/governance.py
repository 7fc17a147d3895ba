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
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from scheduling.engine.governance_state import GovTeam, team_name_problems
from scheduling.models import Queue, Team

from . import governance_trigger, versions
from . import orchestrators as orchestrator_access
from .audit import require_reason, stamp_author
from .capacity import Parents, carving_queue, guarantee_shortfalls, lock_capacity, team_parents
from .enforcement import intent as enforcement_intent


@dataclass(frozen=True)
class QueueChange:
    team: Team
    gpu_model: str
    weight: Decimal
    guaranteed: int
    burst_limit: int
    # The queue's version the edit was made on (form field, If-Match); None: not checked (services/versions.py).
    seen_version: int | None = None


ENTITLEMENT_FIELDS = frozenset({"weight", "guaranteed", "burst_limit"})
# What an edit changed: per (team id, GPU model), the fields it changed (a new queue: all of them). A rule broken
# by siblings is reported on one whose field of that rule was edited, then on any edited one.
Edited = Mapping[tuple[int, str], frozenset[str]]


def edited_fields(changes: list[QueueChange], stored: Mapping[tuple[int, str], Queue]) -> dict:
    """Per changed queue, the fields ``changes`` change against ``stored`` (the queues before the edit)."""
    edited: dict[tuple[int, str], frozenset[str]] = {}
    for change in changes:
        key = (change.team.pk, change.gpu_model)
        before = stored.get(key)
        edited[key] = (
            ENTITLEMENT_FIELDS
            if before is None
            else frozenset(f for f in ENTITLEMENT_FIELDS if getattr(before, f) != getattr(change, f))
        )
    return edited


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


def check_tree(queues: list[Queue], edited: Edited | None = None, parents: Parents | None = None) -> None:
    """Check the whole tree as it would be after a change (``queues`` = every queue, edited or not; ``parents``:
    team id -> parent id after it, by default as stored with the queues' teams' parents on top). A rule broken
    by a group of siblings is reported on the one the admin edited (``edited``: team id and GPU model), not on
    a sibling they left alone."""
    for queue in queues:
        check_queue(queue)
    parents = team_parents(queues) if parents is None else parents
    edited = edited or {}
    _check_weights(queues, edited, parents)
    _check_carved_guarantees(queues, edited, parents)
    _check_promises(queues, parents)


def _blamed(group: list[Queue], edited: Edited, field: str) -> Queue:
    """The queue of ``group`` whose ``field`` the admin edited, else one they edited, else the last."""
    keys = [(q, (q.team_id, q.gpu_model)) for q in reversed(group)]
    return next(
        (q for q, key in keys if field in edited.get(key, ())),
        next((q for q, key in keys if key in edited), group[-1]),
    )


def _check_weights(queues: list[Queue], edited: Edited, parents: Parents) -> None:
    """Weights are shares of the parent's share: one parent's children sum to at most 100 % per GPU model."""
    by_parent: dict[tuple[int | None, str], list[Queue]] = defaultdict(list)
    for queue in queues:
        by_parent[(parents.get(queue.team_id), queue.gpu_model)].append(queue)
    for siblings in by_parent.values():
        total_weight = sum((q.weight for q in siblings), Decimal(0))
        if total_weight > 100:
            names = ", ".join(f"{q.team.slug} {q.weight}%" for q in siblings)
            raise _field_error(
                _blamed(siblings, edited, "weight"),
                "weight",
                f"weights of one parent's children sum to {total_weight}% ({names}); at most 100%.",
            )


def _check_carved_guarantees(queues: list[Queue], edited: Edited, parents: Parents) -> None:
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
                _blamed(group, edited, "guaranteed"),
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
    _require_seen_versions(changes, existing)
    edited = edited_fields(changes, existing)
    touched: list[Queue] = []
    for change in changes:
        queue = existing.get((change.team.pk, change.gpu_model)) or Queue(team=change.team, gpu_model=change.gpu_model)
        queue.weight, queue.guaranteed, queue.burst_limit = change.weight, change.guaranteed, change.burst_limit
        existing[(change.team.pk, change.gpu_model)] = queue
        touched.append(queue)
    check_tree(list(existing.values()), edited=edited)
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


# --- Single-row doors (the Django admin): the same rules, lock and audit as the pages and the API. ---


def check_queue_edit(queue: Queue) -> None:
    """The whole tree as it would be with ``queue`` saved as it stands (new, or any field changed)."""
    others = [q for q in Queue.objects.select_related("team") if q.pk is None or q.pk != queue.pk]
    if any((q.team_id, q.gpu_model) == (queue.team_id, queue.gpu_model) for q in others):
        raise _field_error(queue, "gpu_model", "the team already has a queue for this GPU model; edit that one.")
    check_tree([*others, queue], edited={(queue.team_id, queue.gpu_model): ENTITLEMENT_FIELDS})


@transaction.atomic
def save_queue(queue: Queue, *, by, reason: str) -> Queue:
    """Save one queue edited as a whole row (the admin), under the capacity lock, checked and audited."""
    reason = require_reason(reason)
    lock_capacity()
    check_queue_edit(queue)
    stamp_author(queue, by=by, reason=reason)
    queue.save()
    governance_trigger.request_round()
    return queue


def check_team(team: Team) -> None:
    """A team as it would be saved (new, renamed or re-parented): the tree keeps no loop, and every queue (its
    own and its sub-teams') obeys every rule in the new place, promises included. Errors name ``parent``."""
    check_team_name(team)
    if team.pk is None:
        return  # a new team has no queues and nothing below it yet
    parents = team_parents(moved={team.pk: team.parent_id})
    _check_no_loop(team, parents)
    try:
        check_tree(list(Queue.objects.select_related("team")), parents=parents)
    except ValidationError as error:
        placed = f"under {team.parent.slug}" if team.parent_id else "at the top level"
        problems = [m for messages in error.message_dict.values() for m in messages]
        raise ValidationError({"parent": [f"{team.slug} {placed}: {problem}" for problem in problems]}) from error


def check_team_name(team: Team) -> None:
    """The slug names the team's objects on every governed orchestrator: a Slurm account, Kubernetes
    namespaces and queues. A name one of them cannot use is refused here, naming the orchestrator and the rule
    (a team named before this check is left out of that orchestrator's rounds alone)."""
    problems = []
    for orchestrator in enforcement_intent.governed_orchestrators():
        gov = enforcement_intent.gov_orchestrator(orchestrator)
        mapped = orchestrator_access.governance_options(orchestrator).get("namespaces") or {}
        names = GovTeam(team.slug, namespaces=tuple(mapped.get(team.slug, ())))
        problems += [problem.message for problem in team_name_problems(names, gov)]
    if problems:
        raise ValidationError({"slug": problems})


def _check_no_loop(team: Team, parents: Parents) -> None:
    """A team may not be its own ancestor: the tree walks (shares, enforcement, access) would never end."""
    seen: set[int] = set()
    parent = team.parent_id
    while parent is not None and parent not in seen:
        if parent == team.pk:
            raise ValidationError(
                {
                    "parent": f"{team.slug} cannot be placed under {team.parent.slug}: that is {team.slug} itself or "
                    f"one of its sub-teams, so the team would be its own ancestor."
                }
            )
        seen.add(parent)
        parent = parents.get(parent)


@transaction.atomic
def save_team(team: Team, *, by, reason: str) -> Team:
    """Create, rename or re-parent a team, under the capacity lock (a re-parenting can add promises), checked
    and audited."""
    reason = require_reason(reason)
    lock_capacity()
    check_team(team)
    stamp_author(team, by=by, reason=reason)
    team.full_clean()
    team.save()
    governance_trigger.request_round()
    return team
