"""Prometheus exposition at /metrics, computed from the database at scrape time (no worker state)."""

import hmac

from django.conf import settings
from django.db.models import F, Sum
from django.http import HttpResponse, HttpResponseForbidden
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily

from scheduling.models import Node, Orchestrator, Workload


class PortalCollector:
    def collect(self):
        pool = GaugeMetricFamily("gpuportal_pool_gpus", "GPUs per orchestrator pool", labels=["orchestrator", "state"])
        for row in Node.objects.values("orchestrator__name").annotate(
            total=Sum("gpu_total"), allocated=Sum("gpu_allocated")
        ):
            pool.add_metric([row["orchestrator__name"], "total"], row["total"] or 0)
            pool.add_metric([row["orchestrator__name"], "allocated"], row["allocated"] or 0)
        yield pool
        gpus = F("gang_size") * F("gpus_per_member")
        teams = GaugeMetricFamily("gpuportal_team_gpus", "GPUs held or awaited per team", labels=["team", "state"])
        for row in (
            Workload.objects.filter(state__in=Workload.ACTIVE_STATES)
            .values("team__slug", "state")
            .annotate(g=Sum(gpus))
        ):
            teams.add_metric([row["team__slug"] or "unassigned", row["state"]], row["g"] or 0)
        yield teams
        stale = GaugeMetricFamily(
            "gpuportal_source_stale", "1 when the orchestrator's data is stale", labels=["orchestrator"]
        )
        last = GaugeMetricFamily(
            "gpuportal_source_last_success_timestamp_seconds", "Last good scrape", labels=["orchestrator"]
        )
        for orchestrator in Orchestrator.objects.filter(enabled=True):
            stale.add_metric([orchestrator.name], 1 if orchestrator.is_stale else 0)
            if orchestrator.last_success_at:
                last.add_metric([orchestrator.name], orchestrator.last_success_at.timestamp())
        yield stale
        yield last


def metrics_view(request):
    token = getattr(settings, "METRICS_TOKEN", "")
    if token and not hmac.compare_digest(request.headers.get("Authorization", ""), f"Bearer {token}"):
        return HttpResponseForbidden("metrics need the bearer token set in METRICS_TOKEN")
    registry = CollectorRegistry()
    registry.register(PortalCollector())
    return HttpResponse(generate_latest(registry), content_type=CONTENT_TYPE_LATEST)
