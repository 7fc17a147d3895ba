"""What the portal tells people, inside the portal: an inbox per user, and the chat webhooks admins set.

Sites without mail had no way to hear of a decision (issue 33 item 13): every event that mails someone also
leaves a row in the recipient's inbox, and may post one message to a chat webhook of the site or the team."""

from django.conf import settings
from django.db import models
from django.db.models.functions import Coalesce
from django.utils import timezone
from simple_history.models import HistoricalRecords

from .teams import Team


class Notification(models.Model):
    """One message for one person; only its recipient ever reads it (selectors/inbox.py)."""

    class Kind(models.TextChoices):
        QUOTA = "quota", "Quota request"
        GRANT = "grant", "Grant ending"
        RECLAIM = "reclaim", "Reclaim"
        DRIFT = "drift", "Drift"
        PLAN = "plan", "Plan"
        JOB = "job", "Job action"

    recipient = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="notifications")
    kind = models.CharField(max_length=20, choices=Kind.choices)
    subject = models.CharField(max_length=300)
    body = models.TextField(blank=True)
    link = models.CharField(max_length=500, blank=True)  # a path inside the portal: what the message is about
    created_at = models.DateTimeField(default=timezone.now)
    read_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-pk"]
        indexes = [models.Index(fields=["recipient", "read_at"], name="notification_unread")]

    def __str__(self) -> str:
        return self.subject


class ChatWebhook(models.Model):
    """An incoming-webhook URL of a chat room (Slack, Matrix hookshot, Microsoft Teams workflow) for the whole
    site (no team) or for one team; every change is audited (history with who and why). The delivery fields
    (last sent, last error) are written by the worker and kept out of the history."""

    class Format(models.TextChoices):
        SLACK = "slack", "Slack"
        MATRIX = "matrix", "Matrix (hookshot)"
        TEAMS = "teams", "Microsoft Teams"

    team = models.ForeignKey(Team, null=True, blank=True, on_delete=models.CASCADE, related_name="chat_webhooks")
    url = models.URLField(max_length=500, help_text="the room's incoming-webhook URL (https://…); kept secret")
    format = models.CharField(max_length=10, choices=Format.choices)
    enabled = models.BooleanField(default=True)
    last_sent_at = models.DateTimeField(null=True, blank=True, editable=False)
    last_error = models.TextField(blank=True, editable=False)
    last_error_at = models.DateTimeField(null=True, blank=True, editable=False)
    history = HistoricalRecords(excluded_fields=["last_sent_at", "last_error", "last_error_at"])

    class Meta:
        ordering = ["team__slug", "pk"]
        constraints = [
            # One webhook for the site (team NULL, counted as 0) and one per team.
            models.UniqueConstraint(Coalesce("team", 0), name="one_chat_webhook_per_scope"),
        ]

    def __str__(self) -> str:
        return f"{self.get_format_display()} webhook of {self.team or 'the site'}"

    @property
    def shown_url(self) -> str:
        """The URL as a page shows it: scheme and host only (Slack's and Teams' paths carry the token)."""
        scheme, _, rest = self.url.partition("://")
        return f"{scheme}://{rest.split('/', 1)[0]}/…"


class JobAction(models.Model):
    """A person's cancel, hold or release of one job (issue 33 item 14): who, why, what was sent to the cluster,
    and whether the cluster shows it done. ``sent`` stays until a collection round reads the job back in the
    state asked for (``confirmed``); the history rows are the audit (who and why)."""

    class Verb(models.TextChoices):
        CANCEL = "cancel", "Cancel"
        HOLD = "hold", "Hold"
        RELEASE = "release", "Release"

    class State(models.TextChoices):
        REQUESTED = "requested", "Requested"  # recorded, the worker has not acted yet
        SENT = "sent", "Sent"  # the cluster took the command; waiting for a round to show it
        CONFIRMED = "confirmed", "Confirmed"  # a round read the job back as asked
        FAILED = "failed", "Failed"  # the cluster refused, or the job cannot take this verb

    OPEN_STATES = (State.REQUESTED, State.SENT)

    workload = models.ForeignKey("scheduling.Workload", on_delete=models.CASCADE, related_name="actions")
    team = models.ForeignKey(Team, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    verb = models.CharField(max_length=10, choices=Verb.choices)
    state = models.CharField(max_length=10, choices=State.choices, default=State.REQUESTED)
    requested_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    reason = models.CharField(max_length=1000)
    requested_at = models.DateTimeField(default=timezone.now)
    sent_at = models.DateTimeField(null=True, blank=True)
    confirmed_at = models.DateTimeField(null=True, blank=True)
    command = models.CharField(max_length=1000, blank=True)  # what the portal sent (or would, in a dry run)
    message = models.CharField(max_length=1000, blank=True)  # what the cluster answered or the read-back saw
    dry_run = models.BooleanField(default=False)
    history = HistoricalRecords()

    class Meta:
        ordering = ["-requested_at", "-pk"]
        indexes = [models.Index(fields=["state", "workload"], name="job_action_open")]

    def __str__(self) -> str:
        return f"{self.get_verb_display()} of {self.workload_id}"
