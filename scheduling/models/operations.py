"""What the portal's own machinery did: Celery task outcomes, read by /metrics for operators."""

from django.db import models


class TaskStat(models.Model):
    """Counters per Celery task name, bumped by the worker after each run (``services/task_stats.py``).

    In the database rather than in the worker's memory: /metrics is served by the web processes, and the
    demo's worker shares neither a Redis nor a process with them. One UPDATE per finished task."""

    name = models.CharField(max_length=200, unique=True)
    succeeded = models.PositiveBigIntegerField(default=0)
    failed = models.PositiveBigIntegerField(default=0)
    retried = models.PositiveBigIntegerField(default=0)
    runtime_s_sum = models.FloatField(default=0.0)  # of finished runs (succeeded + failed)
    runtime_s_max = models.FloatField(default=0.0)
    last_finished_at = models.DateTimeField(null=True, blank=True)
    last_failed_at = models.DateTimeField(null=True, blank=True)
    last_error = models.TextField(blank=True)  # scrubbed of secrets, shortened

    def __str__(self) -> str:
        return self.name


class RoundLease(models.Model):
    """The lease of one kind of round (e.g. the collection round): at most one runs at a time however many
    of its messages a worker outage queued up or the broker redelivered (issue 36, Medium 10). The same
    compare-and-delete lease as an orchestrator's scrape (``services/leases.py``); one row per kind."""

    kind = models.CharField(max_length=60, unique=True)
    lease_until = models.DateTimeField(null=True, blank=True, editable=False)
    # The round holding the lease; only it may release it.
    lease_token = models.CharField(max_length=32, blank=True, default="", editable=False)

    def __str__(self) -> str:
        return self.kind
