"""One scrape of one orchestrator: lease, circuit breaker (persisted), collect, ingest or mark stale.

Nothing lives in a worker's memory between rounds: the breaker's state and the scrape lease are
columns of the Orchestrator row, so any worker may run the next scrape and two never run at once.
"""

import time
from dataclasses import dataclass
from datetime import timedelta

from django.core.exceptions import ValidationError
from django.db.models import Q
from django.utils import timezone

from scheduling.collectors import (
    BreakerState,
    CircuitBreaker,
    CollectorError,
    KubernetesCollector,
    RayCollector,
    SlurmCollector,
    TeamMapping,
)
from scheduling.models import CollectorRun, Orchestrator
from scheduling.orchestrator_options import options_problems

from .audit import save_audited
from .busy import scrape_busy
from .orchestrators import CredentialError, endpoint_of, masked, resolve_secret
from .ingest import ingest_snapshot, record_failure
from .ledger import evaluate_quietly

LEASE = timedelta(minutes=5)


def team_mapping(options: dict) -> TeamMapping:
    return TeamMapping(
        slurm_field=options.get("team_field", "account"),
        k8s_label=options.get("team_label", ""),
        aliases=dict(options.get("team_aliases", {})),
    )


def build_collector(orchestrator: Orchestrator, breaker: CircuitBreaker):
    options = orchestrator.options or {}
    common = {
        "name": orchestrator.name,
        "teams": team_mapping(options),
        "breaker": breaker,
        "timeout": float(options.get("timeout_s", 10.0)),
    }
    if orchestrator.kind == Orchestrator.Kind.SLURM:
        return SlurmCollector(
            endpoint_of(orchestrator),
            resolve_secret(orchestrator.credentials_ref),
            options.get("user", "slurm"),
            options.get("api_version", "v0.0.38"),
            **common,
        )
    if orchestrator.kind == Orchestrator.Kind.RAY:
        return RayCollector(endpoint_of(orchestrator), **common)
    if orchestrator.kind == Orchestrator.Kind.KUBERNETES:
        return KubernetesCollector(kubernetes_api(orchestrator), volcano=options.get("volcano", True), **common)
    raise CollectorError(f"kind: no collector for {orchestrator.kind!r} sources yet")


def kubernetes_api(orchestrator: Orchestrator):
    """An ApiClient from the in-cluster service account or a kubeconfig (``options.kubeconfig``)."""
    from kubernetes import client, config

    options = orchestrator.options or {}
    try:
        if options.get("in_cluster"):
            config.load_incluster_config()
            return client.ApiClient()
        return config.new_client_from_config(config_file=options.get("kubeconfig") or None)
    except (config.ConfigException, OSError) as error:
        raise CredentialError(f"kubeconfig: {error}") from error


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
            run = scrape_busy(orchestrator, breaker, resolve_secret(orchestrator.credentials_ref))
        else:
            snapshot = build_collector(orchestrator, breaker).collect()
            run = ingest_snapshot(orchestrator, snapshot, duration_ms=_ms_since(started))
    except CollectorError as error:
        run = record_failure(orchestrator, str(error), duration_ms=_ms_since(started))
    finally:
        Orchestrator.objects.filter(pk=orchestrator_id).update(breaker_state=breaker.state.to_dict(), lease_until=None)
    if orchestrator.kind != Orchestrator.Kind.PROMETHEUS:
        evaluate_quietly()  # drift detection on every scrape (a failed one makes its source stale)
    return ScrapeOutcome(orchestrator.name, run)


def _ms_since(started: float) -> int:
    return round((time.perf_counter() - started) * 1000)


def real_orchestrators():
    from .demo import DEMO_PREFIX

    return Orchestrator.objects.filter(enabled=True).exclude(endpoint__startswith=DEMO_PREFIX)


def register_orchestrator(
    *,
    kind: str,
    name: str,
    url: str,
    credentials_ref: str = "",
    options: dict | None = None,
    enabled: bool | None = None,
    by=None,
    reason: str = "registered from the command line",
) -> tuple[Orchestrator, bool]:
    """Create, or update by name; given ``options`` are merged into the stored ones, and the result must fit
    the kind's schema (``full_clean``). ``enabled`` None leaves it as it is (new rows start enabled)."""
    orchestrator = Orchestrator.objects.filter(name=name).first() or Orchestrator(name=name)
    created = orchestrator.pk is None
    orchestrator.kind, orchestrator.endpoint = kind, url
    orchestrator.credentials_ref = credentials_ref or orchestrator.credentials_ref
    if not isinstance(options, dict | None):  # a merge would fail; the schema names the rule
        raise ValidationError({"options": options_problems(kind, options) or ["must be a JSON object"]})
    orchestrator.options = {**(orchestrator.options or {}), **(options or {})}
    if enabled is not None:
        orchestrator.enabled = enabled
    save_audited(orchestrator, by=by, reason=reason)
    return orchestrator, created
