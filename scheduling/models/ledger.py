"""The GPU ledger: the fleet inventory, each source's view of it, ownership over time, findings.

``Node`` rows (models/fleet.py) keep one row per host name with its *recorded* owner, so when two
orchestrators both list a host only one of them is remembered there. The ledger therefore keeps every
source's own latest word (``SourceView``), joins it to the physical inventory (``FleetHost``, with
``NodeAlias`` for hosts named differently per source) and records who could schedule where over time.
"""

from django.db import models
from simple_history.models import HistoricalRecords


class FleetHost(models.Model):
    """A physical GPU host: what the fleet owns, whatever any orchestrator says about it."""

    name = models.CharField(
        max_length=120, unique=True, help_text="Canonical host name (usually the FQDN's first label)"
    )
    gpu_model = models.CharField(max_length=40, blank=True)
    gpu_total = models.PositiveIntegerField(help_text="GPUs physically installed")
    gpu_uuids = models.JSONField(default=list, blank=True, help_text="GPU UUIDs (nvidia-smi -L), where known")
    retired = models.BooleanField(default=False, help_text="Decommissioned: no longer expected to be owned by anyone")
    notes = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    history = HistoricalRecords()

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class NodeAlias(models.Model):
    """``name`` in ``orchestrator`` is ``host`` (e.g. Ray reports an IP, Kubernetes an FQDN)."""

    orchestrator = models.ForeignKey("scheduling.Orchestrator", on_delete=models.CASCADE, related_name="aliases")
    name = models.CharField(max_length=200, help_text="The node's name in that orchestrator")
    host = models.ForeignKey(FleetHost, on_delete=models.CASCADE, related_name="aliases")
    history = HistoricalRecords()

    class Meta:
        ordering = ["host__name", "orchestrator__name"]
        verbose_name_plural = "node aliases"
        constraints = [models.UniqueConstraint(fields=["orchestrator", "name"], name="one_alias_per_source_name")]

    def __str__(self) -> str:
        return f"{self.orchestrator.name}:{self.name} -> {self.host.name}"


class SourceView(models.Model):
    """One orchestrator's latest word on one node, replaced by each good scrape (stale sources keep theirs)."""

    orchestrator = models.ForeignKey("scheduling.Orchestrator", on_delete=models.CASCADE, related_name="views")
    name = models.CharField(max_length=200)
    schedulable = models.BooleanField(help_text="May this orchestrator place GPU work there now (the issue's rule)")
    state = models.CharField(max_length=120, blank=True)
    why_not = models.CharField(max_length=300, blank=True)
    gpu_total = models.PositiveIntegerField(default=0)
    gpu_allocated = models.PositiveIntegerField(default=0)
    gpu_backed = models.FloatField(null=True, blank=True, help_text="GPUs listed workloads hold there; null: unknown")
    gpu_uuids = models.JSONField(default=list, blank=True)
    seen_at = models.DateTimeField()

    class Meta:
        ordering = ["orchestrator__name", "name"]
        constraints = [models.UniqueConstraint(fields=["orchestrator", "name"], name="one_view_per_source_node")]

    def __str__(self) -> str:
        return f"{self.orchestrator.name}:{self.name}"


class OwnershipInterval(models.Model):
    """From ``started_at`` until ``ended_at`` (open: null) ``orchestrator`` could schedule on ``node``.
    One row per change, not per round: a year of a stable fleet is one row per node."""

    node = models.CharField(max_length=200, db_index=True)
    orchestrator = models.ForeignKey("scheduling.Orchestrator", on_delete=models.CASCADE, related_name="+")
    started_at = models.DateTimeField()
    ended_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["node", "started_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["node", "orchestrator"], condition=models.Q(ended_at__isnull=True), name="one_open_interval"
            )
        ]
        indexes = [models.Index(fields=["ended_at", "started_at"])]

    def __str__(self) -> str:
        return f"{self.node}: {self.orchestrator_id} {self.started_at:%Y-%m-%d %H:%M} - {self.ended_at or 'now'}"


class LedgerFinding(models.Model):
    """A drift the ledger found. ``opened_at`` null: seen, still inside its grace (not shown, not alerted);
    ``closed_at`` set: the condition cleared (kept as history)."""

    class Kind(models.TextChoices):
        DOUBLE_OWNERSHIP = "double_ownership", "Double ownership"
        ORPHAN = "orphan", "Orphan (owned by none)"
        STUCK_TRANSITION = "stuck_transition", "Stuck transition"
        CAPACITY_MISMATCH = "capacity_mismatch", "Capacity mismatch"
        PHANTOM_ALLOCATION = "phantom_allocation", "Phantom allocation"
        UNKNOWN_NODE = "unknown_node", "Unknown node"

    class Severity(models.TextChoices):
        HIGH = "high", "High"
        MEDIUM = "medium", "Medium"
        LOW = "low", "Low"

    key = models.CharField(max_length=300, db_index=True)
    kind = models.CharField(max_length=24, choices=Kind.choices)
    severity = models.CharField(max_length=8, choices=Severity.choices)
    node = models.CharField(max_length=200)
    orchestrators = models.CharField(max_length=300, blank=True, help_text="Comma-separated orchestrator names")
    explanation = models.TextField()
    first_seen = models.DateTimeField()
    last_seen = models.DateTimeField()
    opened_at = models.DateTimeField(null=True, blank=True)
    closed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-first_seen"]
        constraints = [
            models.UniqueConstraint(fields=["key"], condition=models.Q(closed_at__isnull=True), name="one_live_finding")
        ]
        indexes = [models.Index(fields=["closed_at", "kind"]), models.Index(fields=["node"])]

    def __str__(self) -> str:
        return f"{self.get_kind_display()} on {self.node}"

    @property
    def orchestrator_names(self) -> tuple[str, ...]:
        return tuple(name for name in self.orchestrators.split(",") if name)

    @property
    def status(self) -> str:
        if self.closed_at is not None:
            return "closed"
        return "open" if self.opened_at is not None else "pending"


class LedgerRound(models.Model):
    """A single row: the lock that serialises evaluations, and when the last one ran."""

    evaluated_at = models.DateTimeField(null=True, blank=True)
    duration_ms = models.PositiveIntegerField(default=0)
    hosts = models.PositiveIntegerField(default=0)
    stale_sources = models.CharField(max_length=300, blank=True)

    def __str__(self) -> str:
        return f"ledger round @ {self.evaluated_at}"
