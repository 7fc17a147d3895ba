"""A collection round, and one scrape of one orchestrator: lease, circuit breaker (persisted), collect,
ingest or mark stale.

Nothing lives in a worker's memory between rounds: the breaker's state and the scrape lease are
columns of the Orchestrator row, so any worker may run the next scrape and two never run at once.
"""

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.utils import timezone

from scheduling.collectors import BreakerState, CircuitBreaker, CollectorError
from scheduling.collectors.deadline import total_deadline
from scheduling.demo.stepper import RoundResult
from scheduling.models import CollectorRun, Orchestrator

from . import leases
from .accounting import sync_accounting
from .audit import save_audited
from .busy import scrape_busy
from .demo import run_demo_round
from .fragmentation import record_fragmentation_sample
from .ingest import ingest_snapshot, record_failure
from .ledger import evaluate_after_scrape
from .orchestrators import build_collector, configure, masked, option, secret_of


@dataclass(frozen=True)
class ScrapeLimits:
    """How long one scrape of one orchestrator may take: ``hard_s`` its task's hard time limit, ``soft_s`` the soft
    one (the task records why it stopped), ``http_s`` the total deadline of its HTTP calls (the clean way out: a
    failed scrape that marks the source stale before either limit fires)."""

    hard_s: int
    soft_s: int
    http_s: float


def scrape_limits(orchestrator: Orchestrator) -> ScrapeLimits:
    """The orchestrator's ``options.scrape_time_limit_s``, else GPUPORTAL_TASK_TIME_LIMITS["scrape"]: with many
    clusters, each has its own, so a slow one is cut at its limit while the others' scrapes commit. The default
    gives today's figures (180 s hard, 120 s soft, GPUPORTAL_SCRAPE_DEADLINE_S for HTTP)."""
    hard = int(option(orchestrator, "scrape_time_limit_s") or settings.GPUPORTAL_TASK_TIME_LIMITS["scrape"])
    soft = max(hard - 60, hard * 2 // 3, 1)
    return ScrapeLimits(hard, soft, min(settings.GPUPORTAL_SCRAPE_DEADLINE_S, soft * 0.75))


def scrape_limits_of(orchestrator_id: int) -> ScrapeLimits:
    """``scrape_limits`` of a stored orchestrator; the defaults for one deleted meanwhile (its scrape finds nothing)."""
    orchestrator = Orchestrator.objects.filter(pk=orchestrator_id).first()
    return scrape_limits(orchestrator or Orchestrator())


def lease_length(limits: ScrapeLimits | None = None) -> timedelta:
    """A scrape's lease outlives the scrape task's hard time limit (the longer of the default and the source's
    own): a lease that ran out while its holder still worked let a second scrape of the same source start and
    take another worker slot (issue 36)."""
    default = leases.outliving("scrape")
    return max(default, timedelta(seconds=limits.hard_s + 60)) if limits else default


def acquire_lease(orchestrator_id: int, limits: ScrapeLimits | None = None) -> str | None:
    """The lease's token if this caller now holds it, else None. Only the token's holder may release it."""
    return leases.acquire(Orchestrator.objects.filter(pk=orchestrator_id), lease_length(limits))


def release_lease(orchestrator_id: int, token: str, **also) -> bool:
    """Compare-and-delete: clears the lease (and writes ``also``) only while ``token`` still holds it, so a
    scrape that outlived its lease never frees, or overwrites the breaker of, the scrape that took it over."""
    return leases.release(Orchestrator.objects.filter(pk=orchestrator_id), token, **also)


@dataclass(frozen=True)
class ScrapeOutcome:
    orchestrator: str
    run: CollectorRun | None
    skipped: str = ""


CollectorFor = Callable[[Orchestrator, CircuitBreaker], Any]


def scrape(orchestrator_id: int, collector_for: CollectorFor = build_collector) -> ScrapeOutcome:
    """Scrape one orchestrator unless another worker holds its lease; the whole scrape's HTTP calls end within
    its ``scrape_limits().http_s``, and one that does not is a failure that marks the source stale.
    ``collector_for``: the collector of the row with this scrape's breaker (a watch process passes its cache's)."""
    orchestrator = Orchestrator.objects.get(pk=orchestrator_id)
    limits = scrape_limits(orchestrator)
    token = acquire_lease(orchestrator_id, limits)
    if token is None:
        return ScrapeOutcome(orchestrator.name, None, skipped="another scrape holds the lease")
    state = BreakerState.from_dict(orchestrator.breaker_state or {})
    breaker = CircuitBreaker(state, mask=lambda text: masked(text, orchestrator))
    started = time.perf_counter()
    try:
        with total_deadline(limits.http_s):
            run = _collect_and_ingest(orchestrator, breaker, started, collector_for)
    except CollectorError as error:
        run = record_failure(orchestrator, str(error), duration_ms=_ms_since(started))
    finally:
        release_lease(orchestrator_id, token, breaker_state=breaker.state.to_dict())
    # Finished jobs from slurmdbd, however slurmctld's scrape went: each source has its own freshness.
    sync_accounting(orchestrator)
    if orchestrator.kind != Orchestrator.Kind.PROMETHEUS:
        evaluate_after_scrape()  # drift detection on every scrape (a failed one makes its source stale)
    return ScrapeOutcome(orchestrator.name, run)


def _collect_and_ingest(
    orchestrator: Orchestrator, breaker: CircuitBreaker, started: float, collector_for: CollectorFor
) -> CollectorRun:
    if orchestrator.kind == Orchestrator.Kind.PROMETHEUS:
        # Issue 11: a metrics source fills busy time into the schedulers' samples (services/busy.py).
        return scrape_busy(orchestrator, breaker, secret_of(orchestrator))
    snapshot = collector_for(orchestrator, breaker).collect()
    return ingest_snapshot(orchestrator, snapshot, duration_ms=_ms_since(started))


def record_overrun(orchestrator_id: int, limit_s: int) -> CollectorRun | None:
    """A scrape stopped at its task's (soft) time limit ``limit_s`` (a call the deadline could not bound, e.g. a
    command or the Kubernetes client): its source is stale like any failed scrape."""
    orchestrator = Orchestrator.objects.filter(pk=orchestrator_id).first()
    if orchestrator is None:
        return None
    return record_failure(orchestrator, f"scrape stopped at its time limit of {limit_s} s", duration_ms=limit_s * 1000)


def _ms_since(started: float) -> int:
    return round((time.perf_counter() - started) * 1000)


def real_orchestrators():
    return Orchestrator.objects.real()


def register_orchestrator(
    *,
    kind: str,
    name: str,
    url: str,
    credentials_ref: str = "",
    options: dict | None = None,
    governance: dict | None = None,
    enabled: bool | None = None,
    node_domain: str | None = None,
    by=None,
    reason: str = "registered from the command line",
) -> tuple[Orchestrator, bool]:
    """Create, or update by name; given ``options`` are merged into the stored ones, and the result must fit
    the kind's schema (``full_clean``). ``governance`` (mode, Slurm cluster name, sacctmgr, ...: docs/governance.md)
    is merged key by key into the stored ``options.governance``, so setting the mode keeps a namespace mapping.
    ``enabled`` None leaves it as it is (new rows start enabled), and so does ``node_domain`` None (new rows
    start in the shared domain, "")."""
    orchestrator = Orchestrator.objects.filter(name=name).first() or Orchestrator(name=name)
    created = orchestrator.pk is None
    if governance:
        stored = option(orchestrator, "governance")
        options = {**(options or {}), "governance": {**(stored if isinstance(stored, dict) else {}), **governance}}
    configure(orchestrator, kind=kind, url=url, credentials_ref=credentials_ref, options=options)
    if enabled is not None:
        orchestrator.enabled = enabled
    if node_domain is not None:
        orchestrator.node_domain = node_domain
    save_audited(orchestrator, by=by, reason=reason)
    return orchestrator, created


COLLECTION_ROUND = "collection round"


class RoundSkipped(Exception):
    """Another round of the same kind holds the lease: this one did nothing."""


def round_lease_length() -> timedelta:
    """Outlives the round task's hard time limit, like a scrape's lease (``lease_length``)."""
    return leases.outliving("round")


def run_round(enqueue_scrape: Callable[[int], object]) -> RoundResult | None:
    """One round: the demo federation advances in-process; each real orchestrator's scrape (but those a watch
    process collects: services/kubernetes_watch.py) is handed to ``enqueue_scrape`` (its own task, with its own
    time limits: ``scrape_limits``; many workers scrape many clusters at once, each committing its own). The round's
    fragmentation sample is the fleet as stored now (real sources as of their latest scrape). Raw rows past the
    retention are pruned by their own task (services/retention.py), in batches.

    One round at a time: rounds a worker outage queued up, or a redelivered one, skip while another holds
    the round's lease (two at once advanced the demo twice over one window and raced on its rollups)."""
    with leases.round_lease(COLLECTION_ROUND, round_lease_length()) as token:
        if token is None:
            raise RoundSkipped(f"another {COLLECTION_ROUND} holds the lease")
        result = run_demo_round()
        record_fragmentation_sample()
        # A source a `watch_kubernetes` process collects from its watch cache is left to it while it renews its mark.
        unwatched = real_orchestrators().exclude(watched_until__gt=timezone.now())
        for orchestrator_id in unwatched.values_list("pk", flat=True):
            enqueue_scrape(orchestrator_id)
        return result
