"""A report build or send whose worker was lost is queued again or failed with the reason, never left
``generating`` or ``sending`` for good (the reaper, docs/operations.md)."""

from datetime import timedelta

import pytest
from django.core import mail
from django.utils import timezone

from scheduling.models import CapacityReport
from scheduling.services import report_delivery

from .conftest import WEEK
from .test_delivery import _subscribe


def _stuck(status, claimed_ago: timedelta, **fields) -> CapacityReport:
    return CapacityReport.objects.create(
        period_start=WEEK.start,
        period_end=WEEK.end,
        time_zone="UTC",
        status=status,
        claimed_by="gone:42",
        claimed_at=timezone.now() - claimed_ago,
        **fields,
    )


@pytest.mark.django_db(transaction=True)  # the reaper runs in autocommit: its enqueue is not deferred
def test_a_build_whose_worker_was_lost_is_queued_again_built_once_and_sent(week, cast):
    _subscribe(cast)
    report = _stuck(
        CapacityReport.Status.GENERATING, report_delivery.build_timeout() + timedelta(minutes=1), attempts=1
    )
    sent = []
    assert report_delivery.reap_stale(timezone.now(), enqueue=sent.append) == {"requeued": 1, "failed": 0}
    report.refresh_from_db()
    assert (
        sent == [report.pk] and report.claimed_by == report_delivery.REQUEUED and "its worker was lost" in report.error
    )
    assert report_delivery.reap_stale(timezone.now(), enqueue=sent.append)["requeued"] == 0  # claim renewed
    assert report_delivery.build_again(report.pk, worker="new:1") == 3
    assert report_delivery.build_again(report.pk, worker="new:2") == 0  # a second message changes nothing
    report.refresh_from_db()
    assert (report.status, report.attempts, report.error, len(mail.outbox)) == (CapacityReport.Status.SENT, 2, "", 3)


@pytest.mark.django_db
def test_a_build_that_keeps_losing_its_worker_is_failed_with_the_reason(week, settings):
    settings.GPUPORTAL_REAPER = {**settings.GPUPORTAL_REAPER, "max_attempts": 2}
    report = _stuck(CapacityReport.Status.GENERATING, report_delivery.build_timeout() * 2, attempts=2)
    assert report_delivery.reap_stale(timezone.now(), enqueue=list.append) == {"requeued": 0, "failed": 1}
    report.refresh_from_db()
    assert report.status == CapacityReport.Status.FAILED and "Build stopped 2 times" in report.error


@pytest.mark.django_db
def test_a_send_cut_off_with_its_worker_is_failed_naming_the_worker_and_a_live_one_is_left(week):
    report = _stuck(CapacityReport.Status.SENDING, report_delivery.build_timeout() + timedelta(minutes=1))
    assert report_delivery.reap_stale(timezone.now(), enqueue=list.append) == {"requeued": 0, "failed": 1}
    report.refresh_from_db()
    assert report.status == CapacityReport.Status.FAILED and "gone:42 claimed it" in report.error
    CapacityReport.objects.filter(pk=report.pk).update(status=CapacityReport.Status.SENDING, claimed_at=timezone.now())
    assert report_delivery.reap_stale(timezone.now(), enqueue=list.append)["failed"] == 0


@pytest.mark.django_db
def test_the_report_list_shows_why_a_report_failed(client, week, cast):
    _stuck(CapacityReport.Status.SENDING, report_delivery.build_timeout() * 2)
    report_delivery.reap_stale(timezone.now(), enqueue=list.append)
    client.force_login(cast["researcher"])
    page = client.get("/reports/")
    assert page.status_code == 200 and b"report-error" in page.content and b"gone:42 claimed it" in page.content
