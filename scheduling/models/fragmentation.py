"""Fleet fragmentation as each collection round saw it: what the fragmentation trend reads.

Rebuilding the trend from workload placements means re-scoring the fleet at every chart point on every
render; one small row per round makes the trend a read of a few stored rows instead.
"""

from django.db import models


class FragmentationSample(models.Model):
    taken_at = models.DateTimeField(unique=True)
    gpus_free = models.FloatField(help_text="Free GPUs on schedulable nodes")
    gpus_fragmented = models.FloatField(help_text="Free GPUs that no request size of the observed mix can use (FGD)")
    largest_gang = models.PositiveIntegerField(help_text="Largest standard gang size (GPUs) that could start")
    placeable = models.JSONField(default=dict, help_text='Gang size in GPUs -> gangs that could start, e.g. {"8": 120}')
    replayed = models.BooleanField(
        default=False, help_text="Rebuilt afterwards from workload placements (backfill), not seen by a round"
    )

    class Meta:
        ordering = ["-taken_at"]

    def __str__(self) -> str:
        return f"{self.taken_at:%Y-%m-%d %H:%M:%S}: {self.gpus_fragmented:.1f} of {self.gpus_free:.0f} free unusable"
