"""A governance round right after a change the clusters must enforce (a grant approved or revoked, shares or
guarantees saved, a plan approved, a drift reverted), so enforcement takes seconds instead of up to a round.
The beat round (every ``GPUPORTAL_ROUND_SECONDS``) stays the backstop: for a grant whose period starts or ends
later, a message lost, a broker down.

Coalesced: the message waits ``GPUPORTAL_GOVERNANCE_TRIGGER_DELAY_S`` and carries the moment it was asked
for; a round that began after that moment has read the change already, so the task skips
(``enforcement.rounds.reconcile_requested``) and a burst of approvals makes one round.

The task is named, not imported: tasks sit above services (import-linter's layers)."""

from __future__ import annotations

import logging

from celery import current_app
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from scheduling.models import Orchestrator

log = logging.getLogger(__name__)
TASK = "scheduling.tasks.reconcile_governance_soon"


def request_round() -> None:
    """Ask for a governance round once the current transaction commits (at once outside one); a rolled-back
    change asks for nothing."""
    transaction.on_commit(_publish)


def _publish() -> None:
    if not Orchestrator.objects.governed().exists():
        return  # the demo alone: nothing to enforce on
    requested_at = timezone.now().isoformat()
    try:
        current_app.signature(TASK, kwargs={"requested_at": requested_at}).apply_async(
            countdown=settings.GPUPORTAL_GOVERNANCE_TRIGGER_DELAY_S
        )
    except Exception:  # a broker down must not undo or fail the decision: the beat round enforces it
        log.warning("could not ask for a governance round; the next beat round enforces the change", exc_info=True)
