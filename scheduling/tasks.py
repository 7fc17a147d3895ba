"""Thin Celery adapters: ids in, one service call, safe to run twice."""

from celery import shared_task
from django.conf import settings

from scheduling.services import collection, demo, metrics, quota


@shared_task(acks_late=True)
def run_round() -> dict[str, int]:
    """One round: the demo federation advances in-process; each real orchestrator is scraped by its own task."""
    result = demo.run_demo_round()
    for orchestrator_id in collection.real_orchestrators().values_list("pk", flat=True):
        scrape_orchestrator.delay(orchestrator_id)
    metrics.prune_samples(settings.GPUPORTAL_SAMPLE_RETENTION_DAYS)
    if result is None:
        return {"started": 0, "finished": 0}
    return {"started": len(result.started), "finished": len(result.finished)}


@shared_task(acks_late=True)
def scrape_orchestrator(orchestrator_id: int) -> dict[str, object]:
    outcome = collection.scrape(orchestrator_id)
    return {
        "orchestrator": outcome.orchestrator,
        "ok": bool(outcome.run and outcome.run.ok),
        "skipped": outcome.skipped,
    }


@shared_task(acks_late=True)
def expire_grants() -> dict[str, int]:
    return quota.sync_grant_states()


@shared_task(acks_late=True)
def ping(value: int) -> int:
    """Round-trip probe used by health checks and the end-to-end worker test."""
    return value + 1
