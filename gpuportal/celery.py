"""Celery application; configuration comes from Django settings (CELERY_* names)."""

import logging
import os
import time

from celery import Celery
from celery.signals import after_setup_logger, after_setup_task_logger, task_postrun, task_prerun

from scheduling.redact import RedactingFilter

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gpuportal.settings")

app = Celery("gpuportal")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@after_setup_logger.connect
@after_setup_task_logger.connect
def mask_secrets_in_worker_logs(logger, **kwargs) -> None:
    """Celery replaces the root handlers set up by Django's LOGGING: put the secrets filter on its own."""
    for handler in logger.handlers:
        handler.addFilter(RedactingFilter())


_started: dict[str, float] = {}  # task id -> monotonic start, in this worker process


@task_prerun.connect
def note_task_start(task_id=None, **kwargs) -> None:
    _started[task_id] = time.monotonic()


@task_postrun.connect
def count_task_outcome(task_id=None, task=None, state=None, retval=None, **kwargs) -> None:
    """Operators' task metrics (runtime, failures) in the database: /metrics is served by other processes."""
    started = _started.pop(task_id, None)
    runtime = time.monotonic() - started if started is not None else None
    outcome = {"SUCCESS": "succeeded", "RETRY": "retried"}.get(state or "", "failed")
    error = f"{type(retval).__name__}: {retval}" if isinstance(retval, BaseException) else ""
    try:
        from scheduling.services import task_stats  # needs the app registry, ready only once the worker runs

        task_stats.record(task.name, outcome, runtime, error)
    except Exception:  # counting must never fail the task it counts
        logging.getLogger(__name__).warning("could not count the outcome of %s", task.name, exc_info=True)
