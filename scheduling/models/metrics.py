"""Allocation time series: raw per-round samples plus hourly and daily rollups.

Raw samples keep the last days at round resolution; charts over weeks and years read rollups, so a
year of data is ~9k hourly or 365 daily rows per team × orchestrator instead of a million raw ones.
A row with ``team`` NULL is the orchestrator's pool as a whole (its capacity and totals).
"""

from django.db import models


class UsageSample(models.Model):
    taken_at = models.DateTimeField()
    orchestrator = models.ForeignKey("scheduling.Orchestrator", on_delete=models.CASCADE, related_name="+")
    team = models.ForeignKey("scheduling.Team", null=True, blank=True, on_delete=models.CASCADE, related_name="+")
    gpus_total = models.FloatField(default=0)
    gpus_allocated = models.FloatField(default=0)
    gpus_busy = models.FloatField(null=True, blank=True)
    gpus_pending = models.FloatField(default=0)
    # Capacity the pool had but could not use: GPUs on down, drained or draining nodes that run nothing,
    # and idle GPUs held for a pending gang (Slurm's PLANNED node state). Zero where a source cannot tell.
    gpus_unavailable = models.FloatField(default=0)
    gpus_planned = models.FloatField(default=0)
    interval_s = models.FloatField(default=30, help_text="Seconds this sample stands for (the round length)")

    class Meta:
        indexes = [
            models.Index(fields=["taken_at"]),
            models.Index(fields=["team", "taken_at"]),
            # Each pool's latest measured sample (the overview's busy GPUs, /metrics): one probe per orchestrator.
            models.Index(
                fields=["orchestrator", "-taken_at"],
                name="usage_pool_measured",
                condition=models.Q(team__isnull=True, gpus_busy__isnull=False),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.taken_at:%Y-%m-%d %H:%M} {self.orchestrator_id}/{self.team_id}"


class UsageRollup(models.Model):
    """GPU-seconds summed over a period; averages are ``gpu_s_* / period_seconds``."""

    class Resolution(models.TextChoices):
        HOUR = "hour", "Hour"
        DAY = "day", "Day"

    resolution = models.CharField(max_length=8, choices=Resolution.choices)
    period_start = models.DateTimeField()
    orchestrator = models.ForeignKey("scheduling.Orchestrator", on_delete=models.CASCADE, related_name="+")
    team = models.ForeignKey("scheduling.Team", null=True, blank=True, on_delete=models.CASCADE, related_name="+")
    gpu_s_total = models.FloatField(default=0)
    gpu_s_allocated = models.FloatField(default=0)
    gpu_s_busy = models.FloatField(null=True, blank=True)
    gpu_s_pending = models.FloatField(default=0)
    gpu_s_unavailable = models.FloatField(default=0)
    gpu_s_planned = models.FloatField(default=0)
    covered_s = models.FloatField(default=0, help_text="Seconds of the period that samples cover")

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["resolution", "period_start", "orchestrator", "team"],
                name="one_rollup_per_period",
                nulls_distinct=False,
            )
        ]
        indexes = [models.Index(fields=["resolution", "period_start"])]

    def __str__(self) -> str:
        return f"{self.resolution} {self.period_start:%Y-%m-%d %H:%M} {self.orchestrator_id}/{self.team_id}"
