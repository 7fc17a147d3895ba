"""Fair-share policy edits from the portal: the diff of an edited tree, its dry-run validation and
entitlement preview, and one-click revert.

All go through ``governance`` so its rules stay the only rules: ``propose`` diffs the edited values against
the queues and runs ``check_tree`` on unsaved copies, ``revert_change`` saves through ``apply_queue_changes``.
"""

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import timedelta
from decimal import Decimal

from django.core.exceptions import ValidationError
from django.utils.text import Truncator

from scheduling.models import Queue
from scheduling.selectors.policies import EntitlementRow, QueueValues, entitlement_preview

from .governance import QueueChange, apply_queue_changes, check_tree, edited_fields


def proposed_tree(changes: list[QueueChange]) -> list[Queue]:
    """Every queue as it would be after ``changes`` (unsaved copies; the database is not touched)."""
    current = {(q.team_id, q.gpu_model): q for q in Queue.objects.select_related("team")}
    for change in changes:
        queue = current.get((change.team.pk, change.gpu_model))
        copy = Queue(pk=queue.pk if queue else None, team=change.team, gpu_model=change.gpu_model)
        copy.weight, copy.guaranteed, copy.burst_limit = change.weight, change.guaranteed, change.burst_limit
        current[(change.team.pk, change.gpu_model)] = copy
    return list(current.values())


@dataclass(frozen=True)
class Proposal:
    """An edit of the fair-share tree, not saved: what changes, the governance errors the tree would have
    (by field), and the entitlements before and after (only for a valid tree)."""

    changes: list[QueueChange] = field(default_factory=list)
    errors: dict[str, list[str]] = field(default_factory=dict)
    preview: list[EntitlementRow] = field(default_factory=list)


def diff(queues: list[Queue], edited: Iterable[dict]) -> list[QueueChange]:
    """The changes in ``edited`` (one dict per queue: its ``queue`` id, ``weight``, ``guaranteed`` and
    ``burst_limit``) against ``queues``; rows for unknown queues and unchanged rows are left out."""
    by_id = {q.pk: q for q in queues}
    changes = []
    for values in edited:
        queue = by_id.get(values.get("queue"))
        if queue is None:
            continue
        new = (Decimal(values["weight"]), values["guaranteed"], values["burst_limit"])
        if new != (queue.weight, queue.guaranteed, queue.burst_limit):
            # The version the row was loaded at: a value that differs only because another admin saved since
            # is refused on save, not written back over their edit (issue 36).
            changes.append(QueueChange(queue.team, queue.gpu_model, *new, seen_version=values.get("version")))
    return changes


def propose(queues: list[Queue], edited: Iterable[dict]) -> Proposal:
    """Diff, check and preview an edited tree (nothing is saved)."""
    changes = diff(queues, edited)
    errors = check_proposed(changes)
    if errors:
        return Proposal(changes, errors)
    after = [
        QueueValues(q.team_id, q.gpu_model, float(q.weight), q.guaranteed, q.burst_limit)
        for q in proposed_tree(changes)
    ]
    return Proposal(changes, errors, entitlement_preview(after))


def check_proposed(changes: list[QueueChange]) -> dict[str, list[str]]:
    """The governance errors the tree would have after ``changes``, by field ({} when it is valid)."""
    try:
        stored = {(q.team_id, q.gpu_model): q for q in Queue.objects.all()}
        check_tree(proposed_tree(changes), edited=edited_fields(changes, stored))
    except ValidationError as error:
        return error.message_dict
    return {}


def change_set(history_id: int) -> list:
    """The versions saved together with ``history_id``: one ``apply_queue_changes`` call writes its edits with
    the same author and reason within moments, and only reverting them together keeps the tree valid."""
    version = Queue.history.get(history_id=history_id)
    window = timedelta(seconds=2)
    return list(
        Queue.history.select_related("team").filter(
            history_type="~",
            history_user_id=version.history_user_id,
            history_change_reason=version.history_change_reason,
            history_date__range=(version.history_date - window, version.history_date + window),
        )
    ) or [version]


def revert_change(history_id: int, *, by, reason: str = "") -> list[Queue]:
    """Put the queues of a change set back to the values they had before it (an audited edit like any other)."""
    versions = change_set(history_id)
    changes = []
    for version in versions:
        before = version.prev_record
        if before is None:
            raise ValidationError({"history": "this version created the queue; there is nothing to revert to."})
        changes.append(
            QueueChange(version.team, version.gpu_model, before.weight, before.guaranteed, before.burst_limit)
        )
    # Quoted, not whole: the original reason may already be as long as a reason may be.
    label = Truncator(versions[0].history_change_reason or "no reason given").chars(200)
    why = reason.strip() or f"revert change #{history_id} ({label})"
    return apply_queue_changes(changes, by=by, reason=why)
