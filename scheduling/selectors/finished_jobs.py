"""Finished jobs and how well they used their GPUs, as Open XDMoD's job viewer shows them.

One row per finished workload (completed, failed, cancelled or preempted) with the figures computed by the
database, so the list sorts and pages on them: GPU-hours allocated (GPUs × run time), the wait before the start,
and, where a metrics source measured the job (``WorkloadUtilisation``, from DCGM through Prometheus), the share of
the allocated GPU-seconds that were busy and the GPU-hours spent idle past the grace period. A job never measured
shows no busy figure rather than 0 %: no data is not an idle job.

Whose rows: ``access.workloads_visible_to`` (admins every job; the leads of a team, or of one above it, the team's
jobs; anyone else their own finished jobs, never a teammate's history).
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import Count, F, QuerySet, Sum, Value
from django.db.models.functions import NullIf

from scheduling.models import Workload
from scheduling.selectors.access import workloads_visible_to
from scheduling.selectors.db_time import SecondsBetween

FINISHED_STATES = (
    Workload.State.COMPLETED, Workload.State.FAILED, Workload.State.CANCELLED, Workload.State.PREEMPTED,
)


def finished_workloads(user) -> QuerySet[Workload]:
    """The finished workloads ``user`` may read, with ``gpu_count``, ``run_s``, ``wait_s``, ``gpu_hours``,
    ``busy_pct`` (None when unmeasured) and ``idle_gpu_hours`` computed in SQL."""
    rows = Workload.objects.filter(state__in=FINISHED_STATES, finished_at__isnull=False)
    gpus = F("gang_size") * F("gpus_per_member")
    return (
        workloads_visible_to(user, rows)
        .select_related("orchestrator", "team")
        .annotate(
            gpu_count=gpus,
            run_s=SecondsBetween("started_at", "finished_at"),
            wait_s=SecondsBetween("submitted_at", "started_at"),
        )
        .annotate(
            gpu_hours=F("run_s") * gpus / Value(3600.0),
            busy_pct=Value(100.0) * F("utilisation__busy_gpu_s") / NullIf(F("utilisation__allocated_gpu_s"), 0.0),
            idle_gpu_hours=F("utilisation__idle_allocated_gpu_s") / Value(3600.0),
        )
        .order_by("-finished_at", "-pk")
    )


@dataclass(frozen=True)
class FinishedTotals:
    """The list's sums: its jobs, their GPU-hours, and the busy share over the jobs that were measured."""

    jobs: int
    gpu_hours: float
    measured_jobs: int
    busy_pct: float | None  # busy GPU-seconds over allocated ones, of the measured jobs only


def totals(rows: QuerySet[Workload]) -> FinishedTotals:
    figures = rows.order_by().aggregate(
        jobs=Count("pk"),
        hours=Sum("gpu_hours"),  # not named gpu_hours: an aggregate named as an annotation replaces it
        measured=Count("utilisation"),
        busy=Sum("utilisation__busy_gpu_s"),
        allocated=Sum("utilisation__allocated_gpu_s"),
    )
    busy_pct = 100.0 * figures["busy"] / figures["allocated"] if figures["allocated"] else None
    return FinishedTotals(figures["jobs"], figures["hours"] or 0.0, figures["measured"], busy_pct)
