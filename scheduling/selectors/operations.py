"""Reads for operators' metrics: Celery task counters, and long work that has gone quiet.

"Quiet" is the reaper's own measure (services/reaper.py): the time since an unfinished what-if, report or
rebalance plan last showed a sign of life (a heartbeat, a claim, else its creation or decision). The
reaper fails or re-queues such work after its limits; a quiet age that keeps growing past them means the
reaper itself is not running (beat down), which is what the alert rule watches."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.db.models import Count, F, Min
from django.db.models.functions import Coalesce

from scheduling.models import CapacityReport, RebalancePlan, TaskStat, WhatIfScenario


@dataclass(frozen=True)
class QuietWork:
    kind: str
    unfinished: int
    quietest_s: float  # seconds since the quietest unfinished item's last sign of life; 0 when none


def task_stats() -> list[TaskStat]:
    return list(TaskStat.objects.order_by("name"))


def quiet_work(now: datetime) -> list[QuietWork]:
    sources = {
        "whatif": WhatIfScenario.objects.filter(
            status__in=[WhatIfScenario.Status.QUEUED, WhatIfScenario.Status.RUNNING]
        ).annotate(alive=Coalesce(F("heartbeat_at"), F("created_at"))),
        "report": CapacityReport.objects.filter(
            status__in=[CapacityReport.Status.GENERATING, CapacityReport.Status.SENDING]
        ).annotate(alive=Coalesce(F("claimed_at"), F("period_end"))),
        "plan": RebalancePlan.objects.filter(state=RebalancePlan.State.APPLYING).annotate(
            alive=Coalesce(F("heartbeat_at"), F("decided_at"), F("created_at"))
        ),
    }
    rows = []
    for kind, queryset in sources.items():
        found = queryset.aggregate(unfinished=Count("pk"), oldest=Min("alive"))
        quiet = max(0.0, (now - found["oldest"]).total_seconds()) if found["oldest"] else 0.0
        rows.append(QuietWork(kind, found["unfinished"], quiet))
    return rows
