"""Thin Celery adapters: ids in, one service call, safe to run twice.

Every task acknowledges its message only when it ends (settings: acks late, rejected on a lost worker) and
has a hard time limit, the long ones their own (GPUPORTAL_TASK_TIME_LIMITS); the broker's visibility
timeout outlasts the longest, so a message comes back only when its worker is really gone.
"""

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime

from celery import shared_task
from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.utils import timezone

from scheduling.services import (
    admission,
    chat_webhooks,
    collection,
    directory,
    expander,
    idempotency,
    job_actions,
    quota,
    reaper,
    rebalance,
    reclaim,
    report_delivery,
    retention,
    simulation_runs,
    table_changes,
    whatif,
)
from scheduling.services.enforcement import decisions as enforcement_decisions
from scheduling.services.enforcement import rounds as enforcement_rounds

LIMITS = settings.GPUPORTAL_TASK_TIME_LIMITS
log = logging.getLogger(__name__)


def _limits(kind: str) -> dict[str, int]:
    """Celery's time limits for a kind of task: the soft one a minute early, so the task can say why it stopped."""
    return {"time_limit": LIMITS[kind], "soft_time_limit": max(LIMITS[kind] - 60, 1)}


@shared_task(acks_late=True, **_limits("round"))
def run_round() -> dict[str, int]:
    """One round: the demo federation advances in-process; each real orchestrator is scraped by its own task.
    The round's fragmentation sample is the fleet as stored now (real sources as of their latest scrape).
    Rounds queued up during an outage, or redelivered, run one at a time: the others skip (the round lease)."""
    try:
        result = collection.run_round(enqueue_scrape=enqueue_scrape)
    except collection.RoundSkipped as busy:
        log.info("collection round skipped: %s", busy)
        return {"started": 0, "finished": 0, "skipped": 1}
    if result is None:
        return {"started": 0, "finished": 0}
    return {"started": len(result.started), "finished": len(result.finished)}


def enqueue_scrape(orchestrator_id: int) -> None:
    """One scrape task, with the orchestrator's own time limits (``collection.scrape_limits``: its options, else
    the scrape defaults), so a cluster that hangs holds one collector slot only as long as its own limit."""
    limits = collection.scrape_limits_of(orchestrator_id)
    scrape_orchestrator.apply_async((orchestrator_id,), time_limit=limits.hard_s, soft_time_limit=limits.soft_s)


@shared_task(bind=True, acks_late=True, **_limits("scrape"))
def scrape_orchestrator(self, orchestrator_id: int) -> dict[str, object]:
    """Routed to the collect queue (settings.GPUPORTAL_COLLECT_QUEUE); a scrape past its soft limit is a failure."""
    try:
        outcome = collection.scrape(orchestrator_id)
    except SoftTimeLimitExceeded:
        # The limit that fired: the message's own (enqueue_scrape), else the task's default.
        _hard, soft = self.request.timelimit or (None, None)
        collection.record_overrun(orchestrator_id, int(soft or self.soft_time_limit))
        raise
    return {
        "orchestrator": outcome.orchestrator,
        "ok": bool(outcome.run and outcome.run.ok),
        "skipped": outcome.skipped,
    }


@shared_task(acks_late=True)
def expire_grants() -> dict[str, int]:
    return quota.sync_grant_states()


@shared_task(acks_late=True)
def resync_identities() -> dict[str, int]:
    """Team memberships follow directory groups between sign-ins (services/directory.py)."""
    return directory.resync_identities()


@shared_task(acks_late=True)
def remind_expiring_grants() -> int:
    return quota.remind_expiring_grants()


@shared_task(acks_late=True)
def purge_idempotency_keys() -> int:
    """Idempotency keys are kept a day (services/idempotency.py); older rows only take room."""
    return idempotency.purge_expired()


@shared_task(acks_late=True)
def prune_admission_decisions() -> int:
    """Admission decisions are kept for a bounded time (services/admission.prune_decisions)."""
    return admission.prune_decisions(timezone.now())


@shared_task(acks_late=True)
def prune_expander_decisions() -> int:
    """The gpu-priority-expander's answers are kept GPUPORTAL_EXPANDER_RETENTION_DAYS (services/expander.prune)."""
    return expander.prune(timezone.now())


@shared_task(acks_late=True)
def prune_raw_history() -> dict[str, int]:
    """Raw scrape rows older than the admin's retention go, in batches; rollups stay (services/retention.py).
    Cut short by its time limit it has still committed every batch done: the next run goes on from there."""
    return retention.prune_raw(timezone.now())


@shared_task(acks_late=True)
def compact_table_changes() -> int:
    """Keep the per-table write log (the API list cache's generations) to about one row per table."""
    return table_changes.compact()


@shared_task(acks_late=True, expires=60)
def heartbeat() -> bool:
    """Beat, every GPUPORTAL_HEARTBEAT_S: its recorded finish (TaskStat) is the worker's heartbeat in /health."""
    return True


@shared_task(acks_late=True, expires=60)
def collector_heartbeat() -> bool:
    """The same for the worker of the collect queue (settings.CELERY_TASK_ROUTES)."""
    return True


@shared_task(acks_late=True)
def ping(value: int) -> int:
    """Round-trip probe used by health checks and the end-to-end worker test."""
    return value + 1


# --- Reclaim: borrowed GPUs back for teams below their guarantee (services/reclaim.py). ---


@shared_task(acks_late=True)
def reclaim_round() -> dict[str, int]:
    """One reclaim round per orchestrator whose ``options.reclaim.mode`` is not off."""
    orchestrators = reclaim.reclaiming_orchestrators()
    for orchestrator in orchestrators:
        reclaim_orchestrator.delay(orchestrator.pk)
    return {"orchestrators": len(orchestrators)}


@shared_task(acks_late=True)
def reclaim_orchestrator(orchestrator_id: int) -> dict[str, object]:
    plan = reclaim.reclaim_round(orchestrator_id)
    return {"plan": plan.pk if plan else None, "state": plan.state if plan else None}


@shared_task(acks_late=True)
def apply_reclaim_plan(plan_id: int) -> dict[str, object]:
    """An approved plan's victims stopped (idempotent: a stopped victim answers unchanged)."""
    plan = reclaim.apply_reclaim_plan(plan_id)
    return {"plan": plan.pk, "state": plan.state}


# --- Rebalancer: propose a plan each round; apply an approved one step by step until done. ---


@shared_task(acks_late=True)
def propose_rebalance() -> dict[str, object]:
    for plan_id in rebalance.resumable_plan_ids():  # idempotent: resumes a plan whose step chain was lost
        apply_plan_step.delay(plan_id)
    proposal = rebalance.propose_plan()
    plan = proposal.plan
    if plan is not None and plan.state == plan.State.APPROVED:
        apply_plan_step.delay(plan.pk)
    return {"plan": plan.pk if plan else None, "skipped": proposal.skipped}


@shared_task(acks_late=True)
def apply_plan_step(plan_id: int) -> dict[str, object]:
    """One transition of every move; re-queued until the plan is applied or failed (state is in the DB)."""
    outcome = rebalance.apply_step(plan_id)
    if not outcome.finished:
        apply_plan_step.apply_async((plan_id,), countdown=rebalance.rebalance_settings()["step_retry_s"])
    return {"plan": plan_id, "state": outcome.plan_state, "finished": outcome.finished, "message": outcome.message}


def _redelivered(task) -> bool:
    """Celery hands a message out again only when the worker that had it is gone (acks late)."""
    return bool((task.request.delivery_info or {}).get("redelivered"))


@shared_task(bind=True, acks_late=True, **_limits("report"))
def weekly_capacity_report(self) -> dict[str, object]:
    """Last week's capacity report: built once and mailed once, however many workers run this."""
    return report_delivery.run_weekly(take_over=_redelivered(self))


@shared_task(bind=True, acks_late=True, **_limits("report"))
def build_requested_report(self, report_id: int) -> bool:
    """A finished week's report an admin asked for in the browser (not mailed)."""
    return report_delivery.build_requested(report_id, take_over=_redelivered(self))


@shared_task(acks_late=True, **_limits("report"))
def build_capacity_report(report_id: int) -> int:
    """A report build the reaper queued again after its worker was lost; mails it when built."""
    return report_delivery.build_again(report_id)


@shared_task(acks_late=True)
def reap_stale_work() -> dict[str, dict[str, int]]:
    """Beat, every minute: queue again or fail the long tasks whose worker or message was lost."""
    return reaper.reap(enqueue_whatif=run_whatif.delay, enqueue_report=build_capacity_report.delay)


# --- What-if: one scenario per task; progress and results live on the WhatIfScenario row. ---


@shared_task(bind=True, acks_late=True, **_limits("whatif"))
def run_whatif(self, scenario_id: int) -> dict[str, object]:
    """A message redelivered after its worker died may take over the run that worker left ``running``."""
    with _whatif_time_limit(scenario_id):
        scenario = whatif.run_scenario(scenario_id, take_over=_redelivered(self))
    return {"scenario": scenario_id, "status": scenario.status if scenario else "missing"}


@contextmanager
def _whatif_time_limit(scenario_id: int) -> Iterator[None]:
    try:
        yield
    except SoftTimeLimitExceeded:
        reason = f"Stopped at the time limit of {LIMITS['whatif']} s; try fewer weeks."
        whatif.fail_run(scenario_id, reason, replace_error=True)
        raise


@shared_task(acks_late=True, **_limits("whatif"))
def run_whatif_half(message: dict[str, object]) -> dict[str, object]:
    """The baseline or the scenario of a what-if, run in parallel with the other; a chord stores both."""
    with _whatif_time_limit(int(message["scenario"])):
        return whatif.run_half(message)


@shared_task(acks_late=True)
def store_whatif(
    answers: list[dict[str, object]], scenario_id: int, facts: dict[str, object], build_cpu_s: float
) -> bool:
    """The chord's last step: both halves' figures onto the row at once."""
    return whatif.store_results(answers, scenario_id, facts, build_cpu_s)


@shared_task(acks_late=True, **_limits("whatif"))
def replay_trace(spec: dict[str, object]) -> dict[str, object]:
    """One replay of a fan-out (capacity search round, seed, sweep point); deterministic, so safe to run twice."""
    return simulation_runs.replay_figures(spec)


@shared_task(acks_late=True)
def reconcile_governance() -> dict[str, dict[str, int]] | None:
    """One governance round (docs/governance.md): counts per orchestrator; None when another round holds the
    lease (one round at a time: the next beat comes soon enough)."""
    try:
        return _round_counts(enforcement_rounds.reconcile())
    except enforcement_rounds.RoundInProgress as busy:
        log.info("governance beat round skipped: %s", busy)
        return None


@shared_task(bind=True, acks_late=True, max_retries=settings.GPUPORTAL_GOVERNANCE_BUSY_RETRIES)
def reconcile_governance_soon(self, requested_at: str) -> dict[str, dict[str, int]] | None:
    """The round a change asked for (services/governance_trigger.py); None when a later round read it already.
    An older round still going may have read the intent before the change: try again once it is over (the beat
    round stays the backstop when the retries run out)."""
    try:
        outcomes = enforcement_rounds.reconcile_requested(datetime.fromisoformat(requested_at))
    except enforcement_rounds.RoundInProgress as busy:
        raise self.retry(countdown=settings.GPUPORTAL_GOVERNANCE_BUSY_RETRY_S, exc=busy) from busy
    return None if outcomes is None else _round_counts(outcomes)


def _round_counts(outcomes: list[enforcement_decisions.OrchestratorRound]) -> dict[str, dict[str, int]]:
    return {
        o.orchestrator: {
            "applied": len(o.applied),
            "unchanged": o.unchanged,
            "drifted": len(o.drifted),
            "failed": len(o.failed),
            "pending": len(o.pending),
        }
        for o in outcomes
    }


# --- Chat webhooks: one message per task; the outcome is stored on the webhook for its admin page. ---


@shared_task(bind=True, acks_late=True, max_retries=settings.GPUPORTAL_CHAT_WEBHOOK_RETRIES)
def post_chat_message(self, webhook_id: int, subject: str, body: str = "", link: str = "") -> bool:
    """Post one message; a refused or timed-out post is retried with a growing delay, then left recorded."""
    attempts = self.max_retries + 1
    message = chat_webhooks.Message(subject=subject, body=body, link=link)
    try:
        return chat_webhooks.post(webhook_id, message, attempt=self.request.retries + 1, attempts=attempts)
    except chat_webhooks.DeliveryFailed as failure:
        if self.request.retries >= self.max_retries:
            log.warning("chat webhook %s gave up: %s", webhook_id, failure)
            return False
        raise self.retry(countdown=settings.GPUPORTAL_CHAT_WEBHOOK_RETRY_BASE_S * 2**self.request.retries) from failure


@shared_task(acks_late=True)
def act_on_job(action_id: int) -> str:
    """Send one cancel, hold or release to its cluster; the next collection round confirms it."""
    return job_actions.carry_out(action_id).state
