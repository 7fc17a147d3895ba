"""Thin Celery adapters: each task calls one service and is safe to run twice."""

from celery import shared_task
from django.conf import settings

from scheduling.services import demo, metrics, quota


@shared_task(acks_late=True)
def run_round() -> dict[str, int]:
    """One collection + engine round over the demo federation (real collectors join in issue 5)."""
    result = demo.run_demo_round()
    metrics.prune_samples(settings.GPUPORTAL_SAMPLE_RETENTION_DAYS)
    if result is None:
        return {"started": 0, "finished": 0}
    return {"started": len(result.started), "finished": len(result.finished)}


@shared_task(acks_late=True)
def expire_grants() -> dict[str, int]:
    return quota.sync_grant_states()


@shared_task(acks_late=True)
def ping(value: int) -> int:
    """Round-trip probe used by health checks and the end-to-end worker test."""
    return value + 1
