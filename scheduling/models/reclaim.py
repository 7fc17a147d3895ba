"""Reclaims of borrowed GPUs (scheduling/engine/reclaim.py decides, services/reclaim.py acts): one row per
round that found a team below its guarantee waiting on GPUs other teams borrow on one orchestrator.

The mode is ``Orchestrator.options["reclaim"]["mode"]`` (docs/governance.md, "Reclaim"): *review* stores the
plan for an admin to approve, *auto* applies it at once, *native* leaves the reclaim to the orchestrator's own
(Volcano reclaim, Kueue reclaimWithinCohort, Slurm QOS preemption) and records what it would have done; where
the orchestrator has none (Ray, Kubernetes without Volcano) native mode is applied by the portal, as auto, and the
plan's ``reason`` says so.
"""

from django.conf import settings as conf
from django.db import models
from simple_history.models import HistoricalRecords

from .versioned import Versioned


class ReclaimPlan(Versioned):
    """The victims to stop so owners below their guarantee start, each with its cause; what stopping did.
    Versioned: an admin's decision applies only to the plan as the page showed it (a newer round supersedes it)."""

    class State(models.TextChoices):
        PENDING = "pending", "Pending"
        APPROVED = "approved", "Approved"
        REJECTED = "rejected", "Rejected"
        APPLIED = "applied", "Applied"
        FAILED = "failed", "Failed"
        SUPERSEDED = "superseded", "Superseded"
        NATIVE = "native", "Left to the orchestrator"

    orchestrator = models.ForeignKey("scheduling.Orchestrator", on_delete=models.CASCADE, related_name="reclaims")
    created_at = models.DateTimeField()
    mode = models.CharField(max_length=8)
    dry_run = models.BooleanField(default=False)
    state = models.CharField(max_length=16, choices=State.choices, default=State.PENDING)
    # [{"owner", "owner_guarantee", "owner_held", "request_id", "request_gpus", "waited_s", "cause", "reasons",
    #   "victims": [{"workload_id", "team", "gpus", "priority", "gang_id", "work_lost_gpu_s", "reason"}]}]
    reclaims = models.JSONField(default=list)
    passed = models.JSONField(default=list, blank=True)  # [{"owner", "request_id", "why"}]
    actions = models.JSONField(default=list, blank=True)  # [{"victim", "verb", "changed", "request", "message"}]
    cause = models.TextField(blank=True)
    decided_by = models.ForeignKey(
        conf.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    decided_at = models.DateTimeField(null=True, blank=True)
    reason = models.TextField(blank=True)
    error = models.TextField(blank=True)
    history = HistoricalRecords()

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["orchestrator", "state"])]

    def __str__(self) -> str:
        return f"{self.orchestrator.name}: {len(self.reclaims)} reclaim(s) ({self.state})"

    @property
    def gpus(self) -> float:
        return sum(victim["gpus"] for reclaim in self.reclaims for victim in reclaim["victims"])
