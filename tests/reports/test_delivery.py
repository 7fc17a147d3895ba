"""Built once, sent once: the claim on the report row under concurrent workers, the email's parts, beat."""

import threading

import pytest
from celery.schedules import crontab
from django.conf import settings
from django.core import mail
from django.db import connection
from django.utils import timezone

from scheduling.models import CapacityReport, ReportSubscription
from scheduling.services import report_delivery
from tests.support import require_postgres

from .conftest import WEEK, at


def _subscribe(cast):
    for role, fmt in (("admin", "pdf"), ("researcher", "csv"), ("lead", "link")):
        cast[role].email = f"{cast[role].username}@example.org"
        cast[role].save()
        report_delivery.subscribe(cast[role], fmt)


@pytest.mark.django_db
def test_each_subscriber_gets_text_and_html_parts_with_the_attachment_they_chose(week, cast):
    _subscribe(cast)
    report = report_delivery.generate_report(WEEK)
    assert report_delivery.send_report(report.pk, base_url="https://portal.example/") == 3
    by_address = {m.to[0]: m for m in mail.outbox}
    admin = by_address["ada@example.org"]
    assert admin.subject == "[gpuportal] Weekly capacity report, week of 2026-11-16"
    assert "Suggested actions" in admin.body and f"https://portal.example/reports/{report.pk}/" in admin.body
    ((html, mime),) = admin.alternatives
    assert mime == "text/html" and "<svg" in html
    assert admin.attachments[0][0] == "capacity-report-2026-11-16.pdf" and admin.attachments[0][1].startswith(b"%PDF")
    assert by_address["rita@example.org"].attachments[0][2] == "text/csv"
    assert by_address["leo@example.org"].attachments == []
    assert "leo" not in by_address["rita@example.org"].attachments[0][1]  # a researcher sees no per-user rows
    report.refresh_from_db()
    assert (report.status, report.recipients) == (CapacityReport.Status.SENT, 3)


@pytest.mark.django_db
def test_a_sent_report_is_not_sent_again_by_a_second_run(week, cast):
    _subscribe(cast)
    first = report_delivery.run_weekly(now=at(7, 7))
    second = report_delivery.run_weekly(now=at(7, 7, 5))
    assert (first["sent"], second["sent"]) == (3, 0)
    assert len(mail.outbox) == 3 and CapacityReport.objects.count() == 1


@pytest.mark.django_db
def test_an_unknown_format_is_refused_naming_the_field(cast):
    from django.core.exceptions import ValidationError

    with pytest.raises(ValidationError) as error:
        report_delivery.subscribe(cast["researcher"], "docx")
    assert "format" in error.value.message_dict
    assert not ReportSubscription.objects.exists()


def test_beat_builds_the_report_on_mondays_at_seven_in_the_time_zone():
    entry = settings.CELERY_BEAT_SCHEDULE["weekly-capacity-report"]
    assert entry["task"] == "scheduling.tasks.weekly_capacity_report"
    assert entry["schedule"] == crontab(minute=0, hour=7, day_of_week="mon")
    assert settings.CELERY_TIMEZONE == settings.TIME_ZONE


def _race(target, workers: int = 2) -> list:
    """Run ``target(name)`` in real threads, each on its own database connection, released together."""
    barrier, results, errors = threading.Barrier(workers), [], []

    def run(name):
        try:
            barrier.wait()
            results.append(target(name))
        except Exception as error:  # surfaced below: a thread's failure must fail the test
            errors.append(error)
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(f"worker-{i}",)) for i in range(workers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not errors, errors
    return results


@pytest.mark.services
@pytest.mark.django_db(transaction=True)
def test_two_concurrent_workers_build_one_report_and_send_it_exactly_once(week, cast):
    require_postgres()
    _subscribe(cast)
    built = _race(lambda name: report_delivery.generate_report(WEEK, worker=name).pk)
    assert len(set(built)) == 1 and CapacityReport.objects.count() == 1
    sent = _race(lambda name: report_delivery.send_report(built[0], worker=name))
    assert sorted(sent) == [0, 3]
    assert sorted(m.to[0] for m in mail.outbox) == ["ada@example.org", "leo@example.org", "rita@example.org"]
    report = CapacityReport.objects.get()
    assert report.status == CapacityReport.Status.SENT and report.claimed_by in ("worker-0", "worker-1")


@pytest.mark.django_db
def test_a_failed_build_is_taken_over_by_the_next_run_and_a_live_one_is_not(week):
    report = CapacityReport.objects.create(
        period_start=WEEK.start, period_end=WEEK.end, time_zone="UTC", status=CapacityReport.Status.FAILED
    )
    rebuilt = report_delivery.generate_report(WEEK, worker="second")
    assert (rebuilt.pk, rebuilt.status, rebuilt.claimed_by) == (report.pk, CapacityReport.Status.READY, "second")
    CapacityReport.objects.filter(pk=report.pk).update(
        status=CapacityReport.Status.GENERATING, generated_at=None, claimed_at=timezone.now(), claimed_by="first"
    )
    assert report_delivery.generate_report(WEEK, worker="third").claimed_by == "first"


@pytest.mark.django_db
def test_an_admin_resend_puts_a_sent_report_back_in_the_queue_once(week, cast):
    _subscribe(cast)
    report = report_delivery.generate_report(WEEK)
    report_delivery.send_report(report.pk)
    report_delivery.resend_report(report)
    assert report_delivery.send_report(report.pk) == 3 and report_delivery.send_report(report.pk) == 0
    assert len(mail.outbox) == 6


@pytest.mark.django_db
def test_the_beat_task_builds_and_sends_last_weeks_report(week, cast, settings):
    from unittest import mock

    from scheduling import tasks

    _subscribe(cast)
    with mock.patch("django.utils.timezone.now", return_value=at(7, 7)):  # Monday 07:00, as beat fires
        result = tasks.weekly_capacity_report.apply().get()
    assert result["period_start"] == WEEK.start.isoformat() and result["sent"] == 3
