"""Celery task outcomes counted in the database for /metrics (models/operations.TaskStat).

The worker calls ``record`` from Celery's task_postrun signal (gpuportal/celery.py): one row per task
name, bumped with F() expressions, so concurrent workers never lose a count. Errors are stored scrubbed
of every secret the worker has resolved (scheduling/redact.py) and shortened."""

from __future__ import annotations

from django.db import transaction
from django.db.models import F
from django.db.models.functions import Greatest
from django.utils import timezone

from scheduling.models import TaskStat
from scheduling.redact import redact, remembered

ERROR_CHARS = 500
OUTCOMES = ("succeeded", "failed", "retried")


def record(name: str, outcome: str, runtime_s: float | None, error: str = "") -> None:
    """Count one run of ``name`` ending in ``outcome`` (succeeded, failed or retried)."""
    if outcome not in OUTCOMES:
        raise ValueError(f"outcome: one of {', '.join(OUTCOMES)}, got {outcome!r}")
    now = timezone.now()
    changes: dict[str, object] = {outcome: F(outcome) + 1}
    if runtime_s is not None and outcome != "retried":
        changes |= {
            "runtime_s_sum": F("runtime_s_sum") + runtime_s,
            "runtime_s_max": Greatest(F("runtime_s_max"), runtime_s),
            "last_finished_at": now,
        }
    if outcome == "failed":
        changes |= {"last_failed_at": now, "last_error": redact(error, remembered())[:ERROR_CHARS]}
    with transaction.atomic():
        TaskStat.objects.get_or_create(name=name)
        TaskStat.objects.filter(name=name).update(**changes)
