"""Slurm accounting (slurmdbd) as a usage source: how far its finished jobs have been read, and whether it
answers. Kept apart from the scrape's freshness (``Orchestrator.last_success_at``): slurmctld may answer
while slurmdbd is down, and the other way round."""

from django.db import models


class AccountingSource(models.Model):
    """One Slurm orchestrator's accounting: ``read_until`` is the end of the last window read whole (the next
    read starts a little before it); a failed read sets ``last_error`` and leaves everything else alone."""

    orchestrator = models.OneToOneField(
        "scheduling.Orchestrator", on_delete=models.CASCADE, related_name="accounting_source"
    )
    read_until = models.DateTimeField(null=True, blank=True)
    last_success_at = models.DateTimeField(null=True, blank=True)
    last_error = models.TextField(blank=True)
    last_error_at = models.DateTimeField(null=True, blank=True)
    jobs_recorded = models.PositiveIntegerField(default=0, help_text="Finished jobs written by the last good read")

    def __str__(self) -> str:
        return f"accounting of {self.orchestrator.name}"

    @property
    def stale(self) -> bool:
        """The last read failed (after the last good one)."""
        return bool(self.last_error_at) and (self.last_success_at is None or self.last_error_at > self.last_success_at)
