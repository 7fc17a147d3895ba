"""Generate, store and email the weekly capacity report exactly once, whatever the number of workers.

Every step is claimed with a conditional UPDATE on the report row (``status`` moves forward only from
the state the step expects), so of two workers running the same beat task one builds and one sends,
and the other returns without doing anything. A worker that dies while sending leaves the row in
``sending``: it is not resent automatically (an email twice is worse than an admin's resend), and
``resend_report`` puts it back to ``ready`` on purpose.
"""

from __future__ import annotations

import os
import socket
from datetime import datetime, timedelta

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.mail import EmailMultiAlternatives, get_connection
from django.db import IntegrityError, transaction
from django.db.models import Q
from django.urls import reverse
from django.utils import timezone

from scheduling import reports, selectors
from scheduling.models import CapacityReport, ReportSubscription

from .capacity_report import Window, build_report, week_before

BUILD_TIMEOUT = timedelta(hours=1)  # a build takes seconds; a claim older than this lost its worker


def worker_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def generate_report(window: Window, *, worker: str | None = None) -> CapacityReport:
    """The stored report of ``window``, building it if no worker has: the unique period is the claim."""
    worker = worker or worker_name()
    try:
        with transaction.atomic():
            report = CapacityReport.objects.create(
                period_start=window.start,
                period_end=window.end,
                time_zone=window.time_zone,
                claimed_by=worker,
                claimed_at=timezone.now(),
            )
    except IntegrityError:
        report = CapacityReport.objects.get(period_start=window.start, period_end=window.end)
        if not _reclaim_build(report, worker):
            return report
        report.refresh_from_db()
    return _build_into(report, window)


def _reclaim_build(report: CapacityReport, worker: str) -> bool:
    """Take over a build that failed, or whose worker vanished (claimed longer ago than BUILD_TIMEOUT)."""
    now = timezone.now()
    failed = Q(status=CapacityReport.Status.FAILED, generated_at__isnull=True)
    abandoned = Q(status=CapacityReport.Status.GENERATING, claimed_at__lt=now - BUILD_TIMEOUT)
    claimed = CapacityReport.objects.filter(failed | abandoned, pk=report.pk).update(
        status=CapacityReport.Status.GENERATING, claimed_by=worker, claimed_at=now, error=""
    )
    return claimed == 1


def rebuild_report(report: CapacityReport) -> CapacityReport:
    """Recompute a stored report's content (after a fix or a backfill); its sent state stays."""
    window = Window(report.period_start, report.period_end, report.time_zone)
    return _build_into(report, window, keep_status=report.status in (CapacityReport.Status.SENT,))


def _build_into(report: CapacityReport, window: Window, keep_status: bool = False) -> CapacityReport:
    try:
        content = build_report(window)
    except Exception as error:
        CapacityReport.objects.filter(pk=report.pk).update(status=CapacityReport.Status.FAILED, error=str(error)[:2000])
        raise
    report.content, report.generated_at, report.error = content, timezone.now(), ""
    if not keep_status:
        report.status = CapacityReport.Status.READY
    report.save(update_fields=["content", "generated_at", "error", "status"])
    return report


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
    """An admin's deliberate resend: back to ``ready`` so the next send claims it again."""
    CapacityReport.objects.filter(pk=report.pk).update(status=CapacityReport.Status.READY, claimed_by="", error="")


def run_weekly(now: datetime | None = None) -> dict[str, object]:
    """The beat task's body: build last week's report (once) and send it (once)."""
    window = week_before(now or timezone.now())
    report = generate_report(window)
    sent = send_report(report.pk) if report.status == CapacityReport.Status.READY else 0
    return {"report": report.pk, "period_start": window.start.isoformat(), "sent": sent}


# --- who sees which top-users rows ------------------------------------------------------------------


def top_user_scope(user, tree=None) -> frozenset[str] | None:
    """Team slugs whose per-user rows ``user`` may read: all (None) for admins, else the teams they lead
    and everything below them (Open XDMoD's rule: a PI sees their group's users, staff see everyone).
    ``tree`` is ``selectors.team_tree()`` when the caller asks for many users."""
    if user.is_active and user.is_staff:
        return None
    teams, children = tree or selectors.team_tree()
    return frozenset(teams[tid].slug for tid in selectors.lead_team_ids(user, children) if tid in teams)


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
    from zoneinfo import ZoneInfo

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
    tree = selectors.team_tree()
    for subscription in subscriptions.order_by("user__username"):
        scope = top_user_scope(subscription.user, tree)
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
