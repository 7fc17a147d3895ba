"""Issue 36, Medium 4: a report build whose real Celery worker is SIGKILLed mid-build.

The message comes back to a new worker (acks late), which takes the build over at once instead of refusing
it; a report an admin asked for is never mailed, not even when the reaper rebuilds it; an admin may ask
again for a build stuck ``generating``. Private PostgreSQL and Redis (tests/security/processes.py).
"""

from datetime import timedelta

import pytest
from django.core import mail
from django.utils import timezone

from scheduling.models import CapacityReport, CollectorRun, Orchestrator, ReportSubscription
from scheduling.services import report_delivery

from .processes import wait_for

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]
FAST_RECOVERY = {"CELERY_VISIBILITY_TIMEOUT_S": "3", "CELERY_UNACKED_RESTORE_INTERVAL_S": "1"}


def _last_week_observed():
    """Last week, with one successful scrape in it: a week with no data at all ends "no data", not ready."""
    last_week = (timezone.now() - timedelta(days=8)).date()
    source = Orchestrator.objects.create(name="slurm-a", kind="slurm", endpoint="http://slurm.example:6820")
    CollectorRun.objects.create(orchestrator=source, started_at=report_delivery.week_of(last_week).start, ok=True)
    return last_week


def _status(pk: int) -> str:
    return CapacityReport.objects.values_list("status", flat=True).get(pk=pk)


def test_a_requested_build_whose_worker_is_killed_is_finished_by_the_redelivered_message(
    private_database, private_redis, producer, workers, tmp_path
):
    url = private_database.url
    first = workers.start(database_url=url, broker_url=private_redis.url, gate=tmp_path, **FAST_RECOVERY)
    last_week = _last_week_observed()
    report, queued = report_delivery.request_build(
        last_week, enqueue=lambda pk: producer.send_task("scheduling.tasks.build_requested_report", args=[pk])
    )
    assert queued
    wait_for(lambda: (tmp_path / "paused").exists(), "the worker to be mid-build")
    first.kill()  # SIGKILL: the message stays unacknowledged in Redis
    assert _status(report.pk) == CapacityReport.Status.GENERATING
    workers.start(database_url=url, broker_url=private_redis.url, **FAST_RECOVERY)
    # On main the redelivered message was refused (claimed by the dead worker) and the row stayed
    # generating until the reaper, 31 minutes later.
    wait_for(lambda: _status(report.pk) != CapacityReport.Status.GENERATING, "the new worker to finish", timeout=90)
    row = CapacityReport.objects.get(pk=report.pk)
    assert row.status == CapacityReport.Status.READY and row.content and row.attempts == 2


def test_the_reapers_rebuild_of_a_requested_report_mails_nobody(db, cast, settings):
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    cast["admin"].email = "ada@example.org"
    cast["admin"].save()
    ReportSubscription.objects.create(user=cast["admin"], format=ReportSubscription.Format.LINK)
    last_week = _last_week_observed()
    report, _ = report_delivery.request_build(last_week, enqueue=lambda pk: None)
    # Its worker died long ago: the reaper queues it again and its task rebuilds it.
    CapacityReport.objects.filter(pk=report.pk).update(
        claimed_by="dead:1", claimed_at=timezone.now() - report_delivery.build_timeout() - timedelta(minutes=1)
    )
    queued = []
    report_delivery.reap_stale(timezone.now(), enqueue=queued.append)
    assert queued == [report.pk]
    assert report_delivery.build_again(report.pk) == 0
    assert _status(report.pk) == CapacityReport.Status.READY and mail.outbox == []


def test_an_admin_may_ask_again_for_a_build_stuck_generating(db):
    last_week = _last_week_observed()
    sent = []
    report, _ = report_delivery.request_build(last_week, enqueue=sent.append)
    report_delivery.build_requested(report.pk, worker="dead:1")  # claimed, then (say) killed: still generating
    CapacityReport.objects.filter(pk=report.pk).update(
        status=CapacityReport.Status.GENERATING, claimed_at=timezone.now() - timedelta(minutes=5)
    )
    again, queued = report_delivery.request_build(last_week, enqueue=sent.append)
    assert queued and again.pk == report.pk and sent == [report.pk, report.pk]
    assert report_delivery.build_requested(report.pk)
    assert _status(report.pk) == CapacityReport.Status.READY
