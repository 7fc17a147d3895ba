"""What-if scenarios: the recorded history replayed on a changed fleet, stored so a link shows the result."""

from django.conf import settings
from django.db import models


class WhatIfScenario(models.Model):
    """One what-if run: ``inputs`` (weeks of history and the changes) in, baseline vs scenario ``results`` out.

    ``progress`` (0-100) is written by the Celery task while the simulator runs, so the page can poll it.
    ``team`` is who it was run for: members of that team's branch may read it (none: every team member).
    ``heartbeat_at`` (queued or re-queued, started, progress) lets the reaper find runs whose worker or
    message is gone; ``attempts`` counts starts and ``requeues`` re-queues; ``error`` says why it failed,
    or while unfinished why it was queued or started again.
    """

    class Status(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Running"
        DONE = "done", "Done"
        FAILED = "failed", "Failed"

    name = models.CharField(max_length=120)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    team = models.ForeignKey("scheduling.Team", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    inputs = models.JSONField(default=dict)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.QUEUED)
    progress = models.PositiveSmallIntegerField(default=0)
    results = models.JSONField(default=dict, blank=True)
    error = models.TextField(blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    attempts = models.PositiveSmallIntegerField(default=0)
    requeues = models.PositiveSmallIntegerField(default=0)

    class Meta:
        ordering = ["-created_at", "-pk"]
        constraints = [models.CheckConstraint(condition=models.Q(progress__lte=100), name="progress_is_a_percentage")]

    def __str__(self) -> str:
        return f"What-if #{self.pk} {self.name} ({self.status})"
