"""A collection round, and one scrape of one orchestrator: lease, circuit breaker (persisted), collect,
ingest or mark stale.

Nothing lives in a worker's memory between rounds: the breaker's state and the scrape lease are
columns of the Orchestrator row, so any worker may run the next scrape and two never run at once.
"""

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from scheduling.collectors import BreakerState, CircuitBreaker, CollectorError
from scheduling.demo.stepper import RoundResult
from scheduling.models import CollectorRun, Orchestrator

from .accounting import sync_accounting
from .audit import save_audited
from .busy import scrape_busy
from .demo import run_demo_round
from .fragmentation import prune_fragmentation_samples, record_fragmentation_sample
from .ingest import ingest_snapshot, record_failure
from .ledger import evaluate_quietly
from .metrics import prune_samples
from .orchestrators import build_collector, configure, masked, secret_of

LEASE = timedelta(minutes=5)


def acquire_lease(orchestrator_id: int) -> bool:
    now = timezone.now()
    free = Q(lease_until__isnull=True) | Q(lease_until__lt=now)
    return Orchestrator.objects.filter(Q(pk=orchestrator_id) & free).update(lease_until=now + LEASE) == 1


@dataclass(frozen=True)
class ScrapeOutcome:
    orchestrator: str
    run: CollectorRun | None
    skipped: str = ""


def scrape(orchestrator_id: int) -> ScrapeOutcome:
    """Scrape one orchestrator unless another worker holds its lease."""
    orchestrator = Orchestrator.objects.get(pk=orchestrator_id)
    if not acquire_lease(orchestrator_id):
        return ScrapeOutcome(orchestrator.name, None, skipped="another scrape holds the lease")
    state = BreakerState.from_dict(orchestrator.breaker_state or {})
    breaker = CircuitBreaker(state, mask=lambda text: masked(text, orchestrator))
    started = time.perf_counter()
    try:
        if orchestrator.kind == Orchestrator.Kind.PROMETHEUS:
            # Issue 11: a metrics source fills busy time into the schedulers' samples (services/busy.py).
            run = scrape_busy(orchestrator, breaker, secret_of(orchestrator))
        else:
            snapshot = build_collector(orchestrator, breaker).collect()
            run = ingest_snapshot(orchestrator, snapshot, duration_ms=_ms_since(started))
    except CollectorError as error:
        run = record_failure(orchestrator, str(error), duration_ms=_ms_since(started))
    finally:
        Orchestrator.objects.filter(pk=orchestrator_id).update(breaker_state=breaker.state.to_dict(), lease_until=None)
    # Finished jobs from slurmdbd, however slurmctld's scrape went: each source has its own freshness.
    sync_accounting(orchestrator)
    if orchestrator.kind != Orchestrator.Kind.PROMETHEUS:
        evaluate_quietly()  # drift detection on every scrape (a failed one makes its source stale)
    return ScrapeOutcome(orchestrator.name, run)


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
    by=None,
    reason: str = "registered from the command line",
) -> tuple[Orchestrator, bool]:
    """Create, or update by name; given ``options`` are merged into the stored ones, and the result must fit
    the kind's schema (``full_clean``). ``governance`` (mode, Slurm cluster name, sacctmgr, ...: docs/governance.md)
    is merged key by key into the stored ``options.governance``, so setting the mode keeps a namespace mapping.
    ``enabled`` None leaves it as it is (new rows start enabled)."""
    orchestrator = Orchestrator.objects.filter(name=name).first() or Orchestrator(name=name)
    created = orchestrator.pk is None
    if governance:
        stored = (orchestrator.options or {}).get("governance")
        options = {**(options or {}), "governance": {**(stored if isinstance(stored, dict) else {}), **governance}}
    configure(orchestrator, kind=kind, url=url, credentials_ref=credentials_ref, options=options)
    if enabled is not None:
        orchestrator.enabled = enabled
    save_audited(orchestrator, by=by, reason=reason)
    return orchestrator, created


def run_round(enqueue_scrape: Callable[[int], object]) -> RoundResult | None:
    """One round: the demo federation advances in-process; each real orchestrator's scrape is handed to
    ``enqueue_scrape`` (its own task). The round's fragmentation sample is the fleet as stored now (real
    sources as of their latest scrape); samples past the retention are pruned."""
    result = run_demo_round()
    record_fragmentation_sample()
    for orchestrator_id in real_orchestrators().values_list("pk", flat=True):
        enqueue_scrape(orchestrator_id)
    prune_samples(settings.GPUPORTAL_SAMPLE_RETENTION_DAYS)
    prune_fragmentation_samples(settings.GPUPORTAL_SAMPLE_RETENTION_DAYS)
    return result
