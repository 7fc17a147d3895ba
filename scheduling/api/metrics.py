"""Prometheus exposition at /metrics, computed from the database at scrape time (no worker state)."""

from datetime import timedelta

from django.conf import settings
from django.db.models import F, Sum
from django.http import HttpResponse, HttpResponseForbidden
from django.utils import timezone
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, SummaryMetricFamily

from scheduling.api.bearer import presents_bearer
from scheduling.models import Node, Orchestrator, Workload
from scheduling.rules import is_portal_admin
from scheduling.selectors import busy as busy_reads
from scheduling.selectors import governance_ops, ledger
from scheduling.selectors import operations as operations_reads
from scheduling.services import health


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
        yield from busy_families()
        yield ledger_family()


def busy_families():
    """What GPUs do (DCGM through a Prometheus source), next to the allocation gauges above: allocated is not busy."""
    busy = GaugeMetricFamily(
        "gpuportal_pool_busy_gpus", "Busy GPUs in the latest measured sample", labels=["orchestrator"]
    )
    for name, value in busy_reads.pool_busy_latest().items():
        busy.add_metric([name], value)
    yield busy
    until = timezone.now()
    since = until - timedelta(hours=24)
    efficiency = GaugeMetricFamily(
        "gpuportal_efficiency_ratio", "Busy / allocated GPU-hours over 24 h", labels=["scope", "name"]
    )
    idle = GaugeMetricFamily(
        "gpuportal_idle_allocated_gpu_hours", "Idle-allocated GPU-hours of jobs measured in 24 h", labels=["team"]
    )
    for row in busy_reads.efficiency_by_orchestrator(since, until):
        if row.efficiency is not None:
            efficiency.add_metric(["orchestrator", row.key], row.efficiency)
    for row in busy_reads.efficiency_by_team(since, until):
        if row.efficiency is not None:
            efficiency.add_metric(["team", row.key], row.efficiency)
        idle.add_metric([row.key], row.idle_allocated_h)
    yield efficiency
    yield idle


def ledger_family() -> GaugeMetricFamily:
    """Open ledger findings per kind (every kind, 0 included, so an alert rule can use ``> 0``)."""
    gauge = GaugeMetricFamily("gpuportal_ledger_findings_open", "Open GPU ledger findings per kind", labels=["kind"])
    for kind, count in ledger.open_counts_by_kind().items():
        gauge.add_metric([kind], count)
    return gauge


def monitoring_access(request) -> bool:
    """A portal admin's session, or ``Authorization: Bearer <METRICS_TOKEN>`` (Prometheus, uptime probes)."""
    user = getattr(request, "user", None)
    if user is not None and is_portal_admin(user):
        return True
    return presents_bearer(request, settings.METRICS_TOKEN)


class OperatorCollector:
    """The portal's own machinery: Celery task runs and runtimes (counted by the worker in the database),
    the broker's queue depth (bounded: a hung broker is a missing sample, not a hung scrape) and long work
    gone quiet (what the reaper watches). docs/operations.md lists the alert rules built on these."""

    def collect(self):
        yield from task_families(operations_reads.task_stats())
        depth = GaugeMetricFamily(
            "gpuportal_celery_queue_messages", "Messages waiting in the task broker's queue", labels=["queue"]
        )
        answered = health.start({"celery": lambda: str(health.queue_depth("celery"))})()
        for queue, value in answered.items():
            if value.isdigit():
                depth.add_metric([queue], int(value))
        yield depth
        unfinished = GaugeMetricFamily(
            "gpuportal_unfinished_work", "What-ifs, reports and plans not finished", labels=["kind"]
        )
        quiet = GaugeMetricFamily(
            "gpuportal_quietest_unfinished_work_seconds",
            "Seconds since the quietest unfinished item of a kind last showed a sign of life",
            labels=["kind"],
        )
        for row in operations_reads.quiet_work(timezone.now()):
            unfinished.add_metric([row.kind], row.unfinished)
            quiet.add_metric([row.kind], row.quietest_s)
        yield unfinished
        yield quiet


class GovernanceCollector:
    """Governance rounds, drift and plans waiting for an admin, guarantees not kept: the series behind the
    alerts GpuportalGovernanceRoundFailed, GpuportalGovernanceDriftUnanswered, GpuportalGuaranteeBroken
    (deploy/prometheus/alerts.yml; docs/operations.md)."""

    def collect(self):
        now = timezone.now()
        yield from round_families(governance_ops.rounds_status(), now)
        yield waiting_family(
            "gpuportal_governance_drift_open",
            "Open drift findings (hand edits on a cluster)",
            governance_ops.open_drift(now),
        )
        yield waiting_family(
            "gpuportal_governance_plans_pending",
            "Review-mode plans waiting for a decision",
            governance_ops.pending_plans(now),
        )
        yield from guarantee_families(governance_ops.guarantee_gaps())


def round_families(status, now):
    last = GaugeMetricFamily(
        "gpuportal_governance_round_last_finished_timestamp_seconds", "When the last governance round finished"
    )
    if status.last_finished is not None:
        last.add_metric([], status.last_finished.finished_at.timestamp())
    running = GaugeMetricFamily(
        "gpuportal_governance_round_running_seconds", "How long the round holding the lease has run (0: none)"
    )
    running.add_metric([], (now - status.in_progress.started_at).total_seconds() if status.in_progress else 0)
    failed = GaugeMetricFamily(
        "gpuportal_governance_round_failed",
        "1 when the latest round failed on the orchestrator (unreachable, a refused write, a bad mapping)",
        labels=["orchestrator"],
    )
    objects = GaugeMetricFamily(
        "gpuportal_governance_objects", "Objects per state at the latest round", labels=["orchestrator", "state"]
    )
    for outcome in status.outcomes:
        name = outcome.orchestrator.name
        failed.add_metric([name], 1 if outcome.error else 0)
        for state in ("applied", "unchanged", "drifted", "failed", "pending"):
            objects.add_metric([name, state], getattr(outcome, state))
    yield from (last, running, failed, objects)


def waiting_family(name: str, help_text: str, waiting) -> GaugeMetricFamily:
    """Count and the oldest's age per orchestrator, as one family with a ``measure`` label."""
    gauge = GaugeMetricFamily(name, help_text + " (count; oldest_seconds)", labels=["orchestrator", "measure"])
    for row in waiting:
        gauge.add_metric([row.orchestrator, "count"], row.count)
        gauge.add_metric([row.orchestrator, "oldest_seconds"], row.oldest_s)
    return gauge


def guarantee_families(gaps):
    unmet = GaugeMetricFamily(
        "gpuportal_team_guarantee_unmet_gpus",
        "GPUs of a team's guarantee it awaits (pending) and does not hold; above 0 past the grace: broken",
        labels=["team"],
    )
    guaranteed = GaugeMetricFamily(
        "gpuportal_team_guaranteed_gpus", "A team's guarantee, all GPU models", labels=["team"]
    )
    for gap in gaps:
        unmet.add_metric([gap.team], gap.unmet)
        guaranteed.add_metric([gap.team], gap.guaranteed)
    yield from (unmet, guaranteed)


def task_families(stats):
    runs = CounterMetricFamily("gpuportal_task_runs", "Celery task runs by outcome", labels=["task", "outcome"])
    runtime = SummaryMetricFamily("gpuportal_task_runtime_seconds", "Runtime of finished runs", labels=["task"])
    longest = GaugeMetricFamily("gpuportal_task_runtime_max_seconds", "Longest finished run", labels=["task"])
    failed_at = GaugeMetricFamily(
        "gpuportal_task_last_failure_timestamp_seconds", "When the task last failed", labels=["task"]
    )
    for stat in stats:
        for outcome in ("succeeded", "failed", "retried"):
            runs.add_metric([stat.name, outcome], getattr(stat, outcome))
        runtime.add_metric([stat.name], count_value=stat.succeeded + stat.failed, sum_value=stat.runtime_s_sum)
        longest.add_metric([stat.name], stat.runtime_s_max)
        if stat.last_failed_at:
            failed_at.add_metric([stat.name], stat.last_failed_at.timestamp())
    yield from (runs, runtime, longest, failed_at)


def metrics_view(request):
    """Per-team usage is not for everyone: admins or the token, unless GPUPORTAL_PUBLIC_METRICS opens it."""
    if not (settings.GPUPORTAL_PUBLIC_METRICS or monitoring_access(request)):
        return HttpResponseForbidden(
            "metrics need a portal admin's session or the bearer token set in METRICS_TOKEN",
            content_type="text/plain",
        )
    registry = CollectorRegistry()
    registry.register(PortalCollector())
    registry.register(OperatorCollector())
    registry.register(GovernanceCollector())
    # django-prometheus's HTTP and database metrics live in the default registry, per web process.
    body = generate_latest(registry) + generate_latest(REGISTRY)
    return HttpResponse(body, content_type=CONTENT_TYPE_LATEST)
