"""Generate, store and email the weekly capacity report exactly once, whatever the number of workers.

Every step is claimed with a conditional UPDATE on the report row (``status`` moves forward only from
the state the step expects), so of two workers running the same beat task one builds and one sends,
and the other returns without doing anything. A worker that dies while sending leaves the row in
``sending``: it is not resent automatically (an email twice is worse than an admin's resend), and
``resend_report`` puts it back to ``ready`` on purpose.

The reaper (``reap_stale``, every minute) makes both cases visible instead of silent: a build claimed
longer ago than the report task's hard time limit is queued again (``build_again``) up to
``GPUPORTAL_REAPER["max_attempts"]`` builds, then failed; a send claimed that long ago is failed with
the reason (its recipients are unknown), so an admin decides on the resend.
"""

from __future__ import annotations

import os
import socket
from datetime import date, datetime, time, timedelta
from zoneinfo import ZoneInfo

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.mail import EmailMultiAlternatives, get_connection
from django.db import IntegrityError, transaction
from django.db.models import F, Q
from django.urls import reverse
from django.utils import timezone

from scheduling.models import CapacityReport, ReportSubscription, Team
from scheduling.reports import documents as reports
from scheduling.reports.capacity import Window, build_report, week_before
from scheduling.selectors import access
from scheduling.selectors.report import WeekReads

from . import forecast
from .dispatch import EnqueueFailed, enqueue_after_commit

REQUEUED = "(queued again by the reaper)"  # claimed_by of a build waiting for its new task
REQUESTED = "(requested in the browser)"  # claimed_by of a build an admin asked for, waiting for its task


def build_timeout() -> timedelta:
    """A build or send claimed longer ago than the report task's hard time limit has lost its worker."""
    return timedelta(seconds=settings.GPUPORTAL_TASK_TIME_LIMITS["report"] + 60)


def worker_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def generate_report(window: Window, *, worker: str | None = None, take_over: bool = False) -> CapacityReport:
    """The stored report of ``window``, building it if no worker has: the unique period is the claim.
    ``take_over``: this message was redelivered because its worker died, so a build it left is ours now."""
    worker = worker or worker_name()
    try:
        with transaction.atomic():
            report = CapacityReport.objects.create(
                period_start=window.start,
                period_end=window.end,
                time_zone=window.time_zone,
                claimed_by=worker,
                claimed_at=timezone.now(),
                attempts=1,
            )
    except IntegrityError:
        report = CapacityReport.objects.get(period_start=window.start, period_end=window.end)
        if not _reclaim_build(report, worker, take_over=take_over):
            return report
        report.refresh_from_db()
    return _build_into(report, window)


def _reclaim_build(report: CapacityReport, worker: str, *, take_over: bool = False) -> bool:
    """Take over a build that failed, or whose worker vanished (claimed longer ago than build_timeout(), or
    at once with ``take_over``: Celery redelivers a message only when the worker that had it is gone)."""
    now = timezone.now()
    failed = Q(status=CapacityReport.Status.FAILED, generated_at__isnull=True)
    abandoned = Q(status=CapacityReport.Status.GENERATING)
    if not take_over:
        abandoned &= Q(claimed_at__lt=now - build_timeout())
    claimed = CapacityReport.objects.filter(failed | abandoned, pk=report.pk).update(
        status=CapacityReport.Status.GENERATING, claimed_by=worker, claimed_at=now, error="", attempts=F("attempts") + 1
    )
    return claimed == 1


def rebuild_report(report: CapacityReport) -> CapacityReport:
    """Recompute a stored report's content (after a fix or a backfill); its sent state stays."""
    window = Window(report.period_start, report.period_end, report.time_zone)
    return _build_into(report, window, keep_status=report.status in (CapacityReport.Status.SENT,))


def report_content(window: Window) -> dict:
    """The report's content for ``window`` from the database: the composition over the week's reads, the
    demand outlook from the forecast."""
    return build_report(window, WeekReads(outlook=lambda at: forecast.guarantee_exhaustion(as_of=at)))


def _build_into(report: CapacityReport, window: Window, keep_status: bool = False) -> CapacityReport:
    try:
        content = report_content(window)
    except Exception as error:
        CapacityReport.objects.filter(pk=report.pk).update(status=CapacityReport.Status.FAILED, error=str(error)[:2000])
        raise
    report.content, report.generated_at, report.error = content, timezone.now(), ""
    if not has_data(content):
        report.status = CapacityReport.Status.NO_DATA  # nothing to tell anyone: never "ready to send"
    elif not keep_status or report.status == CapacityReport.Status.NO_DATA:
        report.status = CapacityReport.Status.READY
    report.save(update_fields=["content", "generated_at", "error", "status"])
    return report


def has_data(content: dict) -> bool:
    """False for a week in which nothing was recorded (stored reports from before the flag count as data)."""
    return content.get("sections", {}).get("completeness", {}).get("has_data", True) is not False


def claim_for_sending(report_id: int, worker: str) -> bool:
    """Exactly one caller wins: the UPDATE matches only while the row is still ``ready``."""
    claimed = CapacityReport.objects.filter(pk=report_id, status=CapacityReport.Status.READY).update(
        status=CapacityReport.Status.SENDING, claimed_by=worker, claimed_at=timezone.now()
    )
    return claimed == 1


def send_report(report_id: int, *, worker: str | None = None, base_url: str | None = None) -> int:
    """Email the report to every subscriber if this caller claims it; returns messages sent (0: not ours)."""
    worker = worker or worker_name()
    if not claim_for_sending(report_id, worker):
        return 0
    report = CapacityReport.objects.get(pk=report_id)
    try:
        sent = deliver(report, base_url or settings.GPUPORTAL_BASE_URL)
    except Exception as error:
        CapacityReport.objects.filter(pk=report_id).update(status=CapacityReport.Status.FAILED, error=str(error)[:2000])
        raise
    CapacityReport.objects.filter(pk=report_id).update(
        status=CapacityReport.Status.SENT, sent_at=timezone.now(), recipients=sent
    )
    return sent


def resend_report(report: CapacityReport) -> None:
    """An admin's deliberate resend: back to ``ready`` so the next send claims it again (never a report of a
    week with no data: there is nothing to send)."""
    CapacityReport.objects.filter(pk=report.pk).exclude(status=CapacityReport.Status.NO_DATA).update(
        status=CapacityReport.Status.READY, claimed_by="", error=""
    )


def run_weekly(now: datetime | None = None, *, take_over: bool = False) -> dict[str, object]:
    """The beat task's body: build last week's report (once) and send it (once)."""
    window = week_before(now or timezone.now())
    report = generate_report(window, take_over=take_over)
    sent = send_report(report.pk) if report.status == CapacityReport.Status.READY else 0
    return {"report": report.pk, "period_start": window.start.isoformat(), "sent": sent}


# --- a finished week's report, on an admin's request -------------------------------------------------


def week_of(day: date) -> Window:
    """The Monday-to-Monday week (in TIME_ZONE) that holds ``day``."""
    noon_a_week_later = datetime.combine(day + timedelta(days=7), time(12), tzinfo=ZoneInfo(settings.TIME_ZONE))
    return week_before(noon_a_week_later)


def request_build(day: date, *, enqueue, now: datetime | None = None) -> tuple[CapacityReport, bool]:
    """Queue the build of the report of the week holding ``day``; (the report, whether a build was queued).

    Only a finished week: a report of the running week would be wrong by Monday. A report that exists is
    returned as it is (one per week), unless its build failed, which is queued again. Building this way
    never mails subscribers: they get the weekly report, not the weeks an admin looks back at."""
    now = now or timezone.now()
    window = week_of(day)
    if window.end > now:
        raise ValidationError(
            {
                "week_of": f"the week of {window.start:%Y-%m-%d} is not finished until {window.end:%Y-%m-%d %H:%M} "
                f"{window.time_zone}: a report covers a finished week"
            }
        )
    with transaction.atomic():
        report, created = CapacityReport.objects.get_or_create(
            period_start=window.start,
            period_end=window.end,
            defaults={
                "time_zone": window.time_zone,
                "claimed_by": REQUESTED,
                "claimed_at": now,
                "mail_subscribers": False,
            },
        )
        if not created:
            if not _retry_requested(report, now):
                return report, False
            report.refresh_from_db()
        enqueue_after_commit(
            lambda: enqueue(report.pk), lambda reason: _fail_unfinished(report.pk, f"The build {reason}")
        )
    return report, True


def retry_after() -> timedelta:
    """A build still ``generating`` this long after its claim may be asked for again (its worker may be dead;
    a requested build is never mailed, so building it twice costs only time)."""
    return timedelta(seconds=settings.GPUPORTAL_REPORT_RETRY_AFTER_S)


def _retry_requested(report: CapacityReport, now: datetime) -> bool:
    """Queue a failed build again, or one stuck ``generating`` past ``retry_after()``; a report that is
    ready or sent stays as it is."""
    failed = Q(status=CapacityReport.Status.FAILED)
    stuck = Q(status=CapacityReport.Status.GENERATING, claimed_at__lt=now - retry_after())
    retried = CapacityReport.objects.filter(failed | stuck, pk=report.pk).update(
        status=CapacityReport.Status.GENERATING, claimed_by=REQUESTED, claimed_at=now, error=""
    )
    return retried == 1


def build_finished_weeks(since: datetime, now: datetime | None = None) -> list[CapacityReport]:
    """The reports of every finished week that starts at or after ``since`` (the demo's history), built
    here and now, oldest first, not mailed; a week that has its report keeps it."""
    window, built = week_before(now or timezone.now()), []
    while window.start >= since:
        built.append(generate_report(window))
        window = window.previous()
    return built[::-1]


def build_requested(report_id: int, *, worker: str | None = None, take_over: bool = False) -> bool:
    """The task of ``request_build``: build the report (once, whoever gets the message), without mailing it.
    ``take_over``: the message was redelivered after its worker died, so the build that worker claimed is ours
    (issue 36: it was refused, and the report stayed ``generating`` for half an hour)."""
    mine = Q() if take_over else Q(claimed_by=REQUESTED)
    claimed = CapacityReport.objects.filter(
        mine, pk=report_id, status=CapacityReport.Status.GENERATING
    ).update(claimed_by=worker or worker_name(), claimed_at=timezone.now(), attempts=F("attempts") + 1)
    if not claimed:
        return False
    report = CapacityReport.objects.get(pk=report_id)
    _build_into(report, Window(report.period_start, report.period_end, report.time_zone))
    return True


# --- orphaned builds and sends (the reaper) ----------------------------------------------------------


def reap_stale(now: datetime, *, enqueue) -> dict[str, int]:
    """Queue again the builds whose worker was lost (failing those built max_attempts times); fail the
    sends whose worker was lost, saying so."""
    counts = {"requeued": 0, "failed": 0}
    cutoff = now - build_timeout()
    limit = int(settings.GPUPORTAL_REAPER["max_attempts"])
    stale = CapacityReport.objects.filter(status=CapacityReport.Status.GENERATING, claimed_at__lt=cutoff)
    for pk, attempts in stale.values_list("pk", "attempts"):
        if attempts >= limit:
            counts["failed"] += _fail_unfinished(
                pk,
                f"Build stopped {attempts} times without finishing (its worker was lost each time); not retried again.",
            )
        elif _requeue_build(pk, attempts, cutoff, now, enqueue, limit):
            counts["requeued"] += 1
    sending = CapacityReport.objects.filter(status=CapacityReport.Status.SENDING, claimed_at__lt=cutoff)
    for pk, worker, claimed_at in sending.values_list("pk", "claimed_by", "claimed_at"):
        counts["failed"] += _fail_unfinished(
            pk,
            f"Sending stopped: {worker} claimed it at {claimed_at:%Y-%m-%d %H:%M} UTC and was lost. Some "
            "subscribers may have it; resend it from the admin to mail everyone again.",
        )
    return counts


def _requeue_build(pk: int, attempts: int, cutoff: datetime, now: datetime, enqueue, limit: int) -> bool:
    note = f"Build queued again at {now:%Y-%m-%d %H:%M} UTC: its worker was lost (build {attempts + 1} of {limit})."
    claimed = CapacityReport.objects.filter(
        pk=pk, status=CapacityReport.Status.GENERATING, claimed_at__lt=cutoff
    ).update(claimed_by=REQUEUED, claimed_at=now, error=note)
    if not claimed:
        return False
    try:
        enqueue_after_commit(lambda: enqueue(pk), lambda reason: _fail_unfinished(pk, f"The build {reason}"))
    except EnqueueFailed:
        return False
    return True


def _fail_unfinished(pk: int, reason: str) -> int:
    unfinished = (CapacityReport.Status.GENERATING, CapacityReport.Status.SENDING)
    return CapacityReport.objects.filter(pk=pk, status__in=unfinished).update(
        status=CapacityReport.Status.FAILED, error=reason[:2000]
    )


def build_again(report_id: int, *, worker: str | None = None) -> int:
    """The reaper's task: build a report it queued again (once, whoever gets the message) and send it."""
    worker = worker or worker_name()
    claimed = CapacityReport.objects.filter(
        pk=report_id, status=CapacityReport.Status.GENERATING, claimed_by=REQUEUED
    ).update(claimed_by=worker, claimed_at=timezone.now(), attempts=F("attempts") + 1)
    if not claimed:
        return 0
    report = CapacityReport.objects.get(pk=report_id)
    report = _build_into(report, Window(report.period_start, report.period_end, report.time_zone))
    if not report.mail_subscribers:  # a week an admin asked for: its subscribers get only weekly reports
        return 0
    return send_report(report.pk, worker=worker) if report.status == CapacityReport.Status.READY else 0


# --- email ----------------------------------------------------------------------------------------


def _links(report: CapacityReport, base_url: str) -> dict[str, str]:
    root = base_url.rstrip("/")
    return {
        "page": root + reverse("report-detail", args=[report.pk]),
        **{fmt: root + reverse("report-download", args=[report.pk, fmt]) for fmt in ("html", "pdf", "csv")},
    }


def subject_of(report: CapacityReport) -> str:
    local = timezone.localtime(report.period_start, timezone=_zone(report))
    return f"[gpuportal] Weekly capacity report, week of {local:%Y-%m-%d}"


def _zone(report: CapacityReport):
    return ZoneInfo(report.time_zone or settings.TIME_ZONE)


def deliver(report: CapacityReport, base_url: str) -> int:
    """One message per subscriber (text and HTML parts, the PDF or CSV attached as they chose), each
    rendered for what that subscriber may read; one SMTP connection for all."""
    links = _links(report, base_url)
    subscriptions = (
        ReportSubscription.objects.select_related("user").filter(user__is_active=True).exclude(user__email="")
    )
    rendered: dict[tuple[frozenset[str] | None, str], tuple[str, str, bytes | str | None]] = {}
    messages = []
    tree = Team.objects.tree()
    for subscription in subscriptions.order_by("user__username"):
        scope = access.report_scope(subscription.user, tree)
        key = (scope, subscription.format)
        if key not in rendered:
            rendered[key] = _render_for(report.content, scope, subscription.format, links)
        text, html, attachment = rendered[key]
        message = EmailMultiAlternatives(
            subject_of(report), text, settings.DEFAULT_FROM_EMAIL, [subscription.user.email]
        )
        message.attach_alternative(html, "text/html")
        stem = f"capacity-report-{report.period_start:%Y-%m-%d}"
        if subscription.format == ReportSubscription.Format.PDF:
            message.attach(f"{stem}.pdf", attachment, "application/pdf")
        elif subscription.format == ReportSubscription.Format.CSV:
            message.attach(f"{stem}.csv", attachment, "text/csv")
        messages.append(message)
    if not messages:
        return 0
    with get_connection() as connection:
        return connection.send_messages(messages) or 0


def _render_for(content: dict, scope, fmt: str, links: dict[str, str]):
    text = reports.render_text(content, scope, links)
    html = reports.render_html(content, scope, links=links)
    attachment: bytes | str | None = None
    if fmt == ReportSubscription.Format.PDF:
        attachment = reports.pdf_of(html)
    elif fmt == ReportSubscription.Format.CSV:
        attachment = reports.render_csv(content, scope)
    return text, html, attachment


# --- subscriptions --------------------------------------------------------------------------------


def subscribe(user, fmt: str) -> ReportSubscription:
    """Subscribe (or change the format); an unknown format is refused naming the field and the choices."""
    if fmt not in ReportSubscription.Format.values:
        choices = ", ".join(ReportSubscription.Format.values)
        raise ValidationError({"format": f"Unknown format {fmt!r}: choose one of {choices}."})
    subscription, _created = ReportSubscription.objects.update_or_create(user=user, defaults={"format": fmt})
    return subscription


def unsubscribe(user) -> bool:
    deleted, _ = ReportSubscription.objects.filter(user=user).delete()
    return bool(deleted)


def subscription_of(user) -> ReportSubscription | None:
    return ReportSubscription.objects.filter(user=user).first()
