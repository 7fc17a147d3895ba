"""Time-of-day pool policies and rebalance plans that move nodes between orchestrators."""

from django.conf import settings
from django.db import models
from simple_history.models import HistoricalRecords

from .versioned import Versioned


class PoolPolicy(Versioned):
    """A calendar rule for one orchestrator's pool: "weekdays 08-20: floor 32 GPUs, not lendable".

    ``weekdays`` lists ISO weekday numbers (1 = Monday). A window whose end is before its start runs
    overnight into the next day. Higher ``precedence`` wins where rules for the same orchestrator overlap.
    """

    orchestrator = models.ForeignKey("scheduling.Orchestrator", on_delete=models.CASCADE, related_name="policies")
    name = models.CharField(max_length=120)
    weekdays = models.JSONField(default=list, help_text="ISO weekdays, 1=Monday ... 7=Sunday")
    start_time = models.TimeField()
    end_time = models.TimeField()
    floor_gpus = models.PositiveIntegerField(default=0)
    ceiling_gpus = models.PositiveIntegerField(null=True, blank=True)
    lendable = models.BooleanField(default=True, help_text="May idle floor GPUs be lent to other orchestrators?")
    precedence = models.IntegerField(default=0)
    enabled = models.BooleanField(default=True)
    history = HistoricalRecords()

    class Meta:
        ordering = ["orchestrator__name", "-precedence", "name"]
        verbose_name_plural = "pool policies"
        constraints = [
            models.CheckConstraint(
                condition=models.Q(ceiling_gpus__isnull=True) | models.Q(ceiling_gpus__gte=models.F("floor_gpus")),
                name="ceiling_not_below_floor",
            )
        ]

    def __str__(self) -> str:
        return f"{self.orchestrator.name}: {self.name}"


class RebalancePlan(Versioned):
    """A proposed split of the shared pool: node moves with their predicted effect and reasons."""

    class State(models.TextChoices):
        PROPOSED = "proposed", "Proposed"
        APPROVED = "approved", "Approved"
        REJECTED = "rejected", "Rejected"
        APPLYING = "applying", "Applying"
        APPLIED = "applied", "Applied"
        FAILED = "failed", "Failed"

    created_at = models.DateTimeField(auto_now_add=True)
    state = models.CharField(max_length=16, choices=State.choices, default=State.PROPOSED)
    dry_run = models.BooleanField(default=True)
    reason = models.TextField(blank=True)
    expected_effect = models.JSONField(default=dict, blank=True)
    decided_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT)
    decided_at = models.DateTimeField(null=True, blank=True)
    error = models.TextField(blank=True)
    # Written when an apply step completes: an applying plan silent for long has lost its task chain.
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    history = HistoricalRecords(excluded_fields=["heartbeat_at"])

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"Plan #{self.pk} ({self.state})"


class NodeMove(models.Model):
    class State(models.TextChoices):
        PENDING = "pending", "Pending"
        DRAINING = "draining", "Draining"
        MOVED = "moved", "Moved"
        FAILED = "failed", "Failed"
        ROLLED_BACK = "rolled_back", "Rolled back"

    plan = models.ForeignKey(RebalancePlan, on_delete=models.CASCADE, related_name="moves")
    node = models.ForeignKey("scheduling.Node", on_delete=models.PROTECT, related_name="moves")
    source = models.ForeignKey("scheduling.Orchestrator", on_delete=models.PROTECT, related_name="+")
    target = models.ForeignKey("scheduling.Orchestrator", on_delete=models.PROTECT, related_name="+")
    drain_cost_gpu_s = models.FloatField(default=0)
    reason = models.CharField(max_length=300, blank=True)
    state = models.CharField(max_length=16, choices=State.choices, default=State.PENDING)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["plan", "drain_cost_gpu_s"]

    def __str__(self) -> str:
        if self.drains_only:
            return f"{self.node.name}: drain on {self.source.name}"
        return f"{self.node.name}: {self.source.name} -> {self.target.name}"

    @property
    def drains_only(self) -> bool:
        """A drain (an admin's cordon from the node page): released by its owner and left drained, taken by no
        one; stored as a move whose target is its source, so it is decided and applied like any plan."""
        return self.source_id == self.target_id
