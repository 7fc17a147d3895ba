"""Celery application; configuration comes from Django settings (CELERY_* names)."""

import os

from celery import Celery
from celery.signals import after_setup_logger, after_setup_task_logger

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
