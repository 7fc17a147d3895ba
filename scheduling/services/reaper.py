"""The reaper: every minute (beat), find long tasks whose worker, database connection or message was lost,
and queue them again or fail them with the reason on their page (docs/operations.md, orphaned work).

acks_late with reject_on_worker_lost already brings back the message of a worker killed mid-task (after the
broker's visibility timeout); the reaper is for what that cannot see: a message lost before any worker took
it, a task that died with its database (its message was acknowledged with the error), a send cut off midway.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from django.conf import settings
from django.utils import timezone

from . import rebalance, report_delivery, whatif


def reap(
    *, enqueue_whatif: Callable[[int], object], enqueue_report: Callable[[int], object], now: datetime | None = None
) -> dict[str, dict[str, int]]:
    """What was queued again or failed, per kind of work: ``{"whatif": {...}, "report": {...}, "plan": {...}}``."""
    now = now or timezone.now()
    limits = settings.GPUPORTAL_REAPER
    return {
        "whatif": whatif.reap_stale(now, enqueue=enqueue_whatif, limits=limits),
        "report": report_delivery.reap_stale(now, enqueue=enqueue_report),
        "plan": rebalance.reap_stale(now, limits=limits),
    }
