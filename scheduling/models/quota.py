"""Quota requests and the time-bounded grants they produce."""

from datetime import datetime, timedelta

from django.conf import settings
from django.db import models
from simple_history.models import HistoricalRecords

from .versioned import Versioned


def period_errors(starts_at: datetime, ends_at: datetime, *, now: datetime) -> dict[str, str]:
    """The rules a quota request's period obeys, by field: the form, the API (through the service) and approval
    all ask here. ``now`` is when the request is judged: filing time, so approval applies the same rules."""
    errors: dict[str, str] = {}
    if ends_at <= starts_at:
        errors["ends_at"] = "The end must be after the start."
    elif ends_at <= now:
        errors["ends_at"] = "The period has already ended."
    elif ends_at - starts_at > timedelta(days=settings.GPUPORTAL_QUOTA_MAX_DAYS):
        errors["ends_at"] = (
            f"A period may last at most {settings.GPUPORTAL_QUOTA_MAX_DAYS} days; this one lasts "
            f"{(ends_at - starts_at).days:,} days."
        )
    # Compared as differences, never as starts_at ± days: that overflows near year 1 or 9999.
    if now - starts_at > timedelta(days=settings.GPUPORTAL_QUOTA_MAX_BACKDATE_DAYS):
        errors["starts_at"] = f"The start may be at most {settings.GPUPORTAL_QUOTA_MAX_BACKDATE_DAYS} days in the past."
    elif starts_at - now > timedelta(days=settings.GPUPORTAL_QUOTA_MAX_LEAD_DAYS):
        errors["starts_at"] = f"The start may be at most {settings.GPUPORTAL_QUOTA_MAX_LEAD_DAYS} days ahead."
    return errors


class QuotaRequest(Versioned):
    """A researcher's request for extra GPUs over a period, decided by a lead or an admin.

    Life cycle: draft -> submitted -> approved | denied; approved -> active (when the period starts)
    -> expired (when it ends) | revoked. Transitions live in ``scheduling.services.quota``.
    """

    class State(models.TextChoices):
        DRAFT = "draft", "Draft"
        SUBMITTED = "submitted", "Submitted"
        APPROVED = "approved", "Approved"
        DENIED = "denied", "Denied"
        ACTIVE = "active", "Active"
        EXPIRED = "expired", "Expired"
        REVOKED = "revoked", "Revoked"
        WITHDRAWN = "withdrawn", "Withdrawn"

    TRANSITIONS: dict[str, tuple[str, ...]] = {
        State.DRAFT: (State.SUBMITTED,),
        State.SUBMITTED: (State.APPROVED, State.DENIED, State.WITHDRAWN),
        State.APPROVED: (State.ACTIVE, State.REVOKED, State.EXPIRED),
        State.ACTIVE: (State.EXPIRED, State.REVOKED),
        State.DENIED: (),
        State.EXPIRED: (),
        State.REVOKED: (),
        State.WITHDRAWN: (),
    }

    requester = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="quota_requests")
    team = models.ForeignKey("scheduling.Team", on_delete=models.PROTECT, related_name="quota_requests")
    gpus = models.PositiveIntegerField()
    gpu_model = models.CharField(max_length=40, blank=True, help_text="Blank means any model.")
    orchestrator = models.ForeignKey(
        "scheduling.Orchestrator", null=True, blank=True, on_delete=models.PROTECT, help_text="Blank means any."
    )
    starts_at = models.DateTimeField()
    ends_at = models.DateTimeField()
    justification = models.TextField()
    state = models.CharField(max_length=16, choices=State.choices, default=State.DRAFT)
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    decided_at = models.DateTimeField(null=True, blank=True)
    decision_comment = models.TextField(blank=True)
    # An extension (as ColdFront's renewal): a new request for the period right after this grant's end,
    # decided and promise-checked like any other request.
    extends = models.ForeignKey("self", null=True, blank=True, on_delete=models.PROTECT, related_name="extensions")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    history = HistoricalRecords()

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(ends_at__gt=models.F("starts_at")), name="request_ends_after_start"
            ),
            models.CheckConstraint(condition=models.Q(gpus__gt=0), name="request_asks_for_gpus"),
        ]

    def __str__(self) -> str:
        return f"#{self.pk} {self.team.slug}: {self.gpus} {self.gpu_model or 'GPU'} ({self.state})"

    def can_move_to(self, state: str) -> bool:
        return state in self.TRANSITIONS[self.state]


class QuotaGrant(models.Model):
    """Extra guaranteed GPUs for a team over a period, enforced by the engine while active."""

    class State(models.TextChoices):
        SCHEDULED = "scheduled", "Scheduled"
        ACTIVE = "active", "Active"
        EXPIRED = "expired", "Expired"
        REVOKED = "revoked", "Revoked"

    request = models.OneToOneField(QuotaRequest, on_delete=models.PROTECT, related_name="grant")
    team = models.ForeignKey("scheduling.Team", on_delete=models.PROTECT, related_name="grants")
    gpus = models.PositiveIntegerField()
    gpu_model = models.CharField(max_length=40, blank=True)
    orchestrator = models.ForeignKey("scheduling.Orchestrator", null=True, blank=True, on_delete=models.PROTECT)
    starts_at = models.DateTimeField()
    ends_at = models.DateTimeField()
    state = models.CharField(max_length=16, choices=State.choices, default=State.SCHEDULED)
    # Set once the reminder of the end went out, so beat sends it once per grant; who was told, in words.
    expiry_reminded_at = models.DateTimeField(null=True, blank=True)
    expiry_reminded_to = models.TextField(blank=True)
    history = HistoricalRecords()

    class Meta:
        ordering = ["-starts_at"]
        indexes = [models.Index(fields=["state", "ends_at"])]

    def __str__(self) -> str:
        return f"{self.team.slug}: +{self.gpus} {self.gpu_model or 'GPU'} until {self.ends_at:%Y-%m-%d}"


class CapacityLock(models.Model):
    """One row per lock scope; approvals lock it so concurrent decisions see each other's grants."""

    scope = models.CharField(max_length=60, unique=True)

    def __str__(self) -> str:
        return self.scope
