"""Fair-share policy edits from the portal: dry-run validation of a whole tree, and one-click revert.

Both go through ``governance`` so its rules stay the only rules: ``check_proposed`` runs
``check_tree`` on unsaved copies, ``revert_change`` saves through ``apply_queue_changes``.
"""

from django.core.exceptions import ValidationError

from scheduling.models import Queue

from .governance import QueueChange, apply_queue_changes, check_tree


def proposed_tree(changes: list[QueueChange]) -> list[Queue]:
    """Every queue as it would be after ``changes`` (unsaved copies; the database is not touched)."""
    current = {(q.team_id, q.gpu_model): q for q in Queue.objects.select_related("team")}
    for change in changes:
        queue = current.get((change.team.pk, change.gpu_model))
        copy = Queue(pk=queue.pk if queue else None, team=change.team, gpu_model=change.gpu_model)
        copy.weight, copy.guaranteed, copy.burst_limit = change.weight, change.guaranteed, change.burst_limit
        current[(change.team.pk, change.gpu_model)] = copy
    return list(current.values())


def check_proposed(changes: list[QueueChange]) -> dict[str, list[str]]:
    """The governance errors the tree would have after ``changes``, by field ({} when it is valid)."""
    try:
        check_tree(proposed_tree(changes))
    except ValidationError as error:
        return error.message_dict
    return {}


def revert_change(history_id: int, *, by, reason: str = "") -> Queue:
    """Put a queue back to the values it had before the given change (an audited edit like any other)."""
    version = Queue.history.select_related("team").get(history_id=history_id)
    before = version.prev_record
    if before is None:
        raise ValidationError({"history": "this version created the queue; there is nothing before it to revert to."})
    why = reason.strip() or f"revert change #{history_id} ({version.history_change_reason or 'no reason given'})"
    change = QueueChange(version.team, version.gpu_model, before.weight, before.guaranteed, before.burst_limit)
    return apply_queue_changes([change], by=by, reason=why)[0]
