"""Weekly capacity reports (stored, listed, downloaded, emailed once) and who subscribes to them."""

from django.conf import settings
from django.db import models


class CapacityReport(models.Model):
    """One week of the fleet in operators' terms, computed once and kept (the figures never drift as
    raw samples are pruned). ``content`` is the plain JSON document that every format is rendered from.

    Life cycle: generating -> ready -> sending -> sent (or failed); a week with no data at all ends at
    no_data instead of ready. Each step is claimed with a
    conditional UPDATE, so several workers running the same beat task build and send it exactly once;
    ``claimed_by`` names the worker that holds (or held) the current step, since ``claimed_at``;
    ``attempts`` counts the builds started, so the reaper stops re-queueing a build that keeps dying.
    """

    class Status(models.TextChoices):
        GENERATING = "generating", "Generating"
        READY = "ready", "Ready to send"
        SENDING = "sending", "Sending"
        SENT = "sent", "Sent"
        FAILED = "failed", "Failed"
        # Built, but nothing was recorded that week (content's completeness.has_data false): kept for the
        # record, never sent (issue 33 item 7).
        NO_DATA = "no_data", "No data (not sent)"

    period_start = models.DateTimeField(help_text="Monday 00:00 in the portal's TIME_ZONE (inclusive)")
    period_end = models.DateTimeField(help_text="The next Monday 00:00 in TIME_ZONE (exclusive)")
    time_zone = models.CharField(max_length=64)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.GENERATING)
    content = models.JSONField(default=dict, blank=True)
    generated_at = models.DateTimeField(null=True, blank=True)
    sent_at = models.DateTimeField(null=True, blank=True)
    claimed_by = models.CharField(max_length=200, blank=True)
    claimed_at = models.DateTimeField(null=True, blank=True)
    recipients = models.PositiveIntegerField(default=0)
    error = models.TextField(blank=True)
    attempts = models.PositiveSmallIntegerField(default=0)
    # Only the weekly report is mailed: one an admin asked for is built (and rebuilt by the reaper) unmailed.
    mail_subscribers = models.BooleanField(default=True)

    class Meta:
        ordering = ["-period_start"]
        constraints = [
            models.UniqueConstraint(fields=["period_start", "period_end"], name="one_report_per_period"),
            models.CheckConstraint(condition=models.Q(period_end__gt=models.F("period_start")), name="report_period"),
        ]

    def __str__(self) -> str:
        return f"Capacity report {self.period_start:%Y-%m-%d} ({self.status})"


class ReportSubscription(models.Model):
    """A user who gets the weekly report by email, and in which form."""

    class Format(models.TextChoices):
        PDF = "pdf", "HTML email with the PDF attached"
        LINK = "link", "HTML email with links only"
        CSV = "csv", "HTML email with the CSV attached"

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="report_subscription")
    format = models.CharField(max_length=8, choices=Format.choices, default=Format.PDF)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"{self.user} ({self.format})"
