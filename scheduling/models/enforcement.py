"""Governance enforced on the clusters: what the portal last wrote to each orchestrator, each
reconcile round and its outcome, hand edits found on a cluster (drift), and the plans a *review*-mode
orchestrator waits on. The mode itself is ``Orchestrator.options["governance"]["mode"]`` (auto | review,
default review); docs/governance.md says how a round uses these rows.
"""

from django.conf import settings as conf
from django.db import models
from simple_history.models import HistoricalRecords

from .versioned import Versioned


class AppliedObject(models.Model):
    """One native object as the portal last wrote it (the ``last_applied`` of the next diff).

    ``settings`` holds every field of the engine object (identity included) so it can be rebuilt; ``cause`` is
    the portal change that made the write (a queue edit, a grant, a drift reverted) and ``caused_by`` its
    author. Every write is a history row carrying that cause: the audit trail of what the portal enforced."""

    orchestrator = models.ForeignKey("scheduling.Orchestrator", on_delete=models.CASCADE, related_name="applied")
    object_id = models.CharField(max_length=300)
    kind = models.CharField(max_length=40)
    team = models.CharField(max_length=50, blank=True, db_index=True)  # the team slug it enforces ("" pool-wide)
    settings = models.JSONField(default=dict)
    applied_at = models.DateTimeField()
    cause = models.TextField(blank=True)
    caused_by = models.ForeignKey(
        conf.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    history = HistoricalRecords()

    class Meta:
        ordering = ["orchestrator__name", "object_id"]
        constraints = [models.UniqueConstraint(fields=["orchestrator", "object_id"], name="one_applied_per_object")]

    def __str__(self) -> str:
        return f"{self.orchestrator.name}: {self.object_id}"


class EnforcementRun(models.Model):
    """One reconcile round over every governed orchestrator (``dry_run``: diffed, nothing written).

    It is also the lease that keeps ONE round at a time (services/enforcement/rounds.begin_round): unfinished with a
    fresh ``heartbeat_at``, it holds the lease; only its holder finishes it, and a round whose heartbeat went
    stale (its worker killed) is closed by the next round as cut short."""

    started_at = models.DateTimeField()
    finished_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)  # the holder's last sign of life
    dry_run = models.BooleanField(default=False)
    error = models.TextField(blank=True)

    class Meta:
        ordering = ["-started_at"]

    def __str__(self) -> str:
        return f"round {self.pk} at {self.started_at:%Y-%m-%d %H:%M:%S}"


class EnforcementOutcome(models.Model):
    """What one round did on one orchestrator: objects written, already right, drifted, failed, and changes
    left pending (review mode, held by an open drift finding, or failed and retried next round)."""

    run = models.ForeignKey(EnforcementRun, on_delete=models.CASCADE, related_name="outcomes")
    orchestrator = models.ForeignKey("scheduling.Orchestrator", on_delete=models.CASCADE, related_name="+")
    mode = models.CharField(max_length=16)
    applied = models.PositiveIntegerField(default=0)
    unchanged = models.PositiveIntegerField(default=0)
    drifted = models.PositiveIntegerField(default=0)
    failed = models.PositiveIntegerField(default=0)
    pending = models.PositiveIntegerField(default=0)
    error = models.TextField(blank=True)  # scrubbed of the orchestrator's secrets
    # The object ids behind the counts ({"applied", "drifted", "failed", "pending": [ids]}), so a page reads
    # each object's state (one failed write fails that object, not every team on the orchestrator).
    object_ids = models.JSONField(default=dict, blank=True)
    # False: the cluster could not be read this round (unreachable, bad intent): nothing is known of its objects
    # beyond the last round that read it.
    read_back = models.BooleanField(default=True)

    class Meta:
        ordering = ["run", "orchestrator__name"]

    def __str__(self) -> str:
        return f"{self.run}: {self.orchestrator.name}"


class DriftFinding(models.Model):
    """An object changed on the cluster since the portal applied it (``kubectl edit``, ``sacctmgr modify``, a
    deletion by hand). While open the portal does not overwrite it; an admin reverts it (the next round writes
    the portal's intent back) or adopts it (the cluster's value stays until the portal's intent for the object
    changes), always with a reason, recorded in the history."""

    class State(models.TextChoices):
        OPEN = "open", "Open"
        REVERTED = "reverted", "Reverted"
        ADOPTED = "adopted", "Adopted"

    orchestrator = models.ForeignKey("scheduling.Orchestrator", on_delete=models.CASCADE, related_name="drifts")
    object_id = models.CharField(max_length=300)
    team = models.CharField(max_length=50, blank=True, db_index=True)
    applied = models.JSONField(default=dict)  # what the portal had written
    observed = models.JSONField(null=True, blank=True)  # what the cluster holds (null: deleted by hand)
    desired = models.JSONField(null=True, blank=True)  # the portal's intent when found (adopt keeps to it)
    fields = models.JSONField(default=list)  # [{"field", "before" (applied), "after" (found)}]
    state = models.CharField(max_length=16, choices=State.choices, default=State.OPEN)
    found_at = models.DateTimeField()
    decided_by = models.ForeignKey(
        conf.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    decided_at = models.DateTimeField(null=True, blank=True)
    reason = models.TextField(blank=True)
    history = HistoricalRecords()

    class Meta:
        ordering = ["-found_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["orchestrator", "object_id"], condition=models.Q(state="open"), name="one_open_drift_per_object"
            )
        ]

    def __str__(self) -> str:
        return f"{self.orchestrator.name}: {self.object_id} ({self.state})"


class EnforcementPlan(Versioned):
    """The changes a *review*-mode orchestrator waits on. Approved, the next round applies those of its changes
    still needed; a failed write leaves the plan approved, retried next round. A newer diff supersedes a plan
    nobody decided. Versioned: a decision applies only to the plan as the deciding admin saw it."""

    class State(models.TextChoices):
        PENDING = "pending", "Pending"
        APPROVED = "approved", "Approved"
        REJECTED = "rejected", "Rejected"
        APPLIED = "applied", "Applied"
        SUPERSEDED = "superseded", "Superseded"

    orchestrator = models.ForeignKey("scheduling.Orchestrator", on_delete=models.CASCADE, related_name="plans")
    changes = models.JSONField(default=list)  # [{"id", "action", "desired", "observed", "fields", "reasons"}]
    state = models.CharField(max_length=16, choices=State.choices, default=State.PENDING)
    created_at = models.DateTimeField()
    cause = models.TextField(blank=True)
    decided_by = models.ForeignKey(
        conf.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    decided_at = models.DateTimeField(null=True, blank=True)
    reason = models.TextField(blank=True)
    history = HistoricalRecords()

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.orchestrator.name}: {len(self.changes)} changes ({self.state})"


class EntitlementShare(models.Model):
    """A team's share of its fleet entitlement on one orchestrator and GPU model, as the last round split it
    (docs/governance.md, "The split"): what governance writes there instead of the whole fleet figures.

    One row per (team, orchestrator, model), updated each round; ``running``/``pending`` are the team's own
    demand as the split read it (the next round's hysteresis compares with them). A history row is written
    when the guarantee or cap moves, with ``reason`` saying why (the audit of "why a share moved")."""

    team = models.ForeignKey("scheduling.Team", on_delete=models.CASCADE, related_name="entitlement_shares")
    orchestrator = models.ForeignKey(
        "scheduling.Orchestrator", on_delete=models.CASCADE, related_name="entitlement_shares"
    )
    gpu_model = models.CharField(max_length=100, blank=True)
    guarantee = models.PositiveIntegerField(default=0)
    cap = models.PositiveIntegerField(null=True, blank=True)  # None: no queue for the model, the parent's applies
    running = models.PositiveIntegerField(default=0)
    pending = models.PositiveIntegerField(default=0)
    subtree_running = models.PositiveIntegerField(default=0)
    subtree_pending = models.PositiveIntegerField(default=0)
    over = models.PositiveIntegerField(default=0)
    fleet_guarantee = models.PositiveIntegerField(default=0)
    fleet_cap = models.PositiveIntegerField(null=True, blank=True)
    enforced = models.BooleanField(default=True)  # False: Ray, observed only
    computed_at = models.DateTimeField()
    reason = models.TextField(blank=True)
    history = HistoricalRecords()

    class Meta:
        ordering = ["team__slug", "orchestrator__name", "gpu_model"]
        constraints = [
            models.UniqueConstraint(fields=["team", "orchestrator", "gpu_model"], name="one_share_per_team_cell")
        ]

    def __str__(self) -> str:
        return f"{self.team_id} on {self.orchestrator_id}: guarantee {self.guarantee}, cap {self.cap}"
