from django.db import models


class ExpanderDecision(models.Model):
    """One answer of the gpu-priority-expander to cluster-autoscaler: the node groups it offered, the one the
    portal chose and, for every option, why (``engine.expander.RankedOption`` as JSON). Kept for
    ``GPUPORTAL_EXPANDER_RETENTION_DAYS``; the rebalance page lists the latest."""

    at = models.DateTimeField(auto_now_add=True, db_index=True)
    autoscaler = models.CharField(max_length=253, blank=True, help_text="the gRPC peer that asked")
    default_pool = models.CharField(max_length=120, blank=True)
    chosen = models.JSONField(default=list, blank=True)
    ranked = models.JSONField(default=list, blank=True)
    summary = models.CharField(max_length=500)

    class Meta:
        ordering = ["-at"]

    def __str__(self) -> str:
        return f"{self.at:%Y-%m-%d %H:%M:%S}: {', '.join(self.chosen) or 'no choice'}"
