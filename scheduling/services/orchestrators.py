"""The one reader of an Orchestrator row's ``options`` and credentials: the secret (read where its reference
points, and masked in every error the portal keeps), the collector for a row, and the rebalancer's verbs
for a kind (``collectors/verbs.py``). Everything past here takes plain arguments.

The reference is checked again here, at resolve time, with the same rules as when it was saved
(scheduling/validators.py): a symlink swapped in since, or a row written around the model, must not make
the worker read a file outside the credentials directories. What ``options`` may hold is
``scheduling/orchestrator_options.py``.
"""

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from django.core.exceptions import ValidationError
from django.db import transaction
from kubernetes import client as k8s
from kubernetes import config as k8s_config

from scheduling.collectors import (
    CircuitBreaker,
    CollectorError,
    KubernetesCollector,
    RayCollector,
    SlurmCollector,
    TeamMapping,
)
from scheduling.collectors.httpjson import JsonClient
from scheduling.collectors.prometheus import PrometheusCollector, auth_headers
from scheduling.collectors.slurm import job_cache_for, jwt_headers
from scheduling.collectors.slurm_accounting import (
    SLURMDB_VERSIONS,
    FinishedJob,
    read_finished_jobs_rest,
    read_finished_jobs_sacct,
    sacctmgr_runner,
)
from scheduling.collectors.verbs import KubernetesVerbs, OrchestratorVerbs, RayVerbs, SlurmVerbs
from scheduling.models import Orchestrator
from scheduling.orchestrator_options import options_problems
from scheduling.redact import redact, remember
from scheduling.validators import CredentialsRef, check_credentials_ref, check_endpoint

from .audit import require_reason, stamp_author


class CredentialError(CollectorError):
    """The credentials reference is refused or cannot be resolved (unset variable, unreadable file)."""


class RefusedEndpoint(CollectorError):
    """The endpoint is not one the worker may send credentials to (not http(s))."""


def resolve_secret(reference: str) -> str:
    """The secret ``env:NAME`` or ``file:/path`` names (``""`` for none); the database never holds it."""
    try:
        parsed = check_credentials_ref(reference)
    except ValidationError as error:
        raise CredentialError(f"credentials_ref: {' '.join(error.messages)}") from None
    if parsed is None:
        return ""
    secret = _read(parsed, reference)
    _check_sendable(secret, reference)
    return remember(secret)


def _read(parsed: CredentialsRef, reference: str) -> str:
    if parsed.kind == "env":
        if parsed.target not in os.environ:
            raise CredentialError(f"credentials_ref: environment variable {parsed.target} is not set")
        return os.environ[parsed.target].strip()
    try:
        return Path(parsed.target).read_text(encoding="utf-8").strip()
    except OSError as error:
        raise CredentialError(f"credentials_ref: cannot read {reference[5:]}: {error.strerror}") from None
    except UnicodeDecodeError:
        raise CredentialError(f"credentials_ref: {reference[5:]} is not UTF-8 text") from None


def _check_sendable(secret: str, reference: str) -> None:
    """Every secret travels in an HTTP header: refuse one that a header cannot carry, without echoing it
    (httpx would fail with the value in its message, or with an exception no collector expects)."""
    for offset, char in enumerate(secret):
        if not (" " <= char <= "~" or char == "\t"):
            raise CredentialError(
                f"credentials_ref: the secret in {reference} has a character an HTTP header cannot carry "
                f"at offset {offset} (a line break, a control or a non-ASCII character)"
            )


def secret_of(orchestrator: Orchestrator) -> str:
    """The orchestrator's secret (``""`` for none), resolved now."""
    return resolve_secret(orchestrator.credentials_ref)


def has_credentials(orchestrator: Orchestrator) -> bool:
    """A credentials reference is set (whether it resolves is not asked)."""
    return bool(orchestrator.credentials_ref)


def secrets_of(*orchestrators: Orchestrator) -> list[str]:
    """The secrets of these orchestrators that resolve today (one that does not was never sent)."""
    found = []
    for orchestrator in orchestrators:
        try:
            found.append(secret_of(orchestrator))
        except CredentialError:
            continue
    return found


def masked(text: str, *orchestrators: Orchestrator) -> str:
    """``text`` safe to store or log: the orchestrators' secrets masked in every spelling."""
    return redact(text, secrets_of(*orchestrators))


def secret_destination_problem(stored: Orchestrator | None, endpoint: str, reference_entered: bool) -> str:
    """Why saving ``endpoint`` would send ``stored``'s secret somewhere its admin never chose ('' when it would
    not): a re-pointed orchestrator keeps its credentials only if the reference is entered again with the new
    endpoint (the API: ``credentials_ref`` in the same write; the admin: the field changed or the box ticked)."""
    if stored is None or stored.pk is None or not stored.credentials_ref or reference_entered:
        return ""
    if endpoint == stored.endpoint:
        return ""
    return (
        f"the endpoint changes from {stored.endpoint} to {endpoint}: enter the credentials reference again (or "
        "another, or none) so the stored secret goes to the new endpoint only if you mean it"
    )


def endpoint_of(orchestrator: Orchestrator) -> str:
    """The endpoint the worker may send the secret to, checked again at use (rows written around the model)."""
    try:
        return check_endpoint(orchestrator.endpoint)
    except ValidationError as error:
        raise RefusedEndpoint(f"endpoint: {' '.join(error.messages)}") from None


def _options(orchestrator: Orchestrator) -> dict:
    return orchestrator.options or {}


def option(orchestrator: Orchestrator, name: str, default=None):
    """One top-level entry of ``options`` (``reclaim``, ``admission_bypass``, ``governance``, ...): the services
    that act on a section read it here, so options have one reader."""
    return _options(orchestrator).get(name, default)


# ------------------------------------------------------------------------------------------ collectors


def team_mapping(options: dict) -> TeamMapping:
    return TeamMapping(
        slurm_field=options.get("team_field", "account"),
        k8s_label=options.get("team_label", ""),
        aliases=dict(options.get("team_aliases", {})),
        namespace_teams=namespace_teams(options),
    )


def namespace_teams(options: dict) -> dict[str, str]:
    """namespace -> team of a Kubernetes orchestrator's governance mapping (``governance.namespaces``: team ->
    namespaces): the namespaces governance caps for a team are the team's for attribution and admission too."""
    mapping = (options.get("governance") or {}).get("namespaces") or {}
    return {namespace: team for team, namespaces in sorted(mapping.items()) for namespace in namespaces}


def mapped_namespaces() -> dict[str, str]:
    """Every enabled Kubernetes orchestrator's namespace -> team mapping, together (the admission webhook's)."""
    found: dict[str, str] = {}
    for orchestrator in Orchestrator.objects.filter(enabled=True, kind=Orchestrator.Kind.KUBERNETES):
        found.update(namespace_teams(_options(orchestrator)))
    return found


def runs_volcano(orchestrator: Orchestrator) -> bool:
    """Whether a Kubernetes orchestrator runs the Volcano scheduler (option ``volcano``, on unless set false): the
    webhook sends batch work to it only there."""
    return bool(option(orchestrator, "volcano", True))


def teams_of(orchestrator: Orchestrator) -> TeamMapping:
    """How the orchestrator's jobs map to teams, for readers other than its collector (accounting)."""
    return team_mapping(_options(orchestrator))


def build_collector(orchestrator: Orchestrator, breaker: CircuitBreaker):
    """The scheduler's collector (Slurm, Kubernetes, Ray) for a row, with its endpoint, secret and options."""
    options = _options(orchestrator)
    common = {
        "name": orchestrator.name,
        "teams": team_mapping(options),
        "breaker": breaker,
        "timeout": float(options.get("timeout_s", 10.0)),
    }
    if orchestrator.kind == Orchestrator.Kind.SLURM:
        endpoint, token, user, version = _slurmrestd(orchestrator)
        # One cache per orchestrator in this worker process: its next round asks only for what changed.
        cache = job_cache_for(orchestrator.pk, endpoint, version)
        return SlurmCollector(endpoint, token, user, version, job_cache=cache, **common)
    if orchestrator.kind == Orchestrator.Kind.RAY:
        return RayCollector(endpoint_of(orchestrator), **common)
    if orchestrator.kind == Orchestrator.Kind.KUBERNETES:
        return KubernetesCollector(kubernetes_api(orchestrator), volcano=options.get("volcano", True), **common)
    raise CollectorError(f"kind: no collector for {orchestrator.kind!r} sources yet")


def _slurmrestd(orchestrator: Orchestrator) -> tuple[str, str, str, str]:
    """(endpoint, JWT, user, API version) of a Slurm REST API, as its collector and its verbs use them."""
    options = _options(orchestrator)
    return (
        endpoint_of(orchestrator),
        secret_of(orchestrator),
        options.get("user", "slurm"),
        options.get("api_version", "v0.0.38"),
    )


AccountingReader = Callable[[float, float], list[FinishedJob]]


def accounting_reader(orchestrator: Orchestrator) -> AccountingReader | None:
    """Finished jobs in ``[start, end]`` from the Slurm orchestrator's accounting, or ``None`` when it has none
    (no ``options.accounting``). slurmrestd's slurmdb endpoints where its API version has them, else
    ``sacct --json`` (``options.accounting.sacct``: the fleet's own sacct; it also forces sacct)."""
    options = _options(orchestrator)
    accounting = options.get("accounting")
    if orchestrator.kind != Orchestrator.Kind.SLURM or accounting is None:
        return None
    url, token, user, api_version = _slurmrestd(orchestrator)
    timeout = float(options.get("timeout_s", 10.0))
    if api_version in SLURMDB_VERSIONS and not accounting.get("sacct"):

        def read_rest(start: float, end: float) -> list[FinishedJob]:
            client = JsonClient(
                url, name=f"{orchestrator.name} slurmdb", headers=jwt_headers(user, token), timeout=timeout
            )
            try:
                return read_finished_jobs_rest(client, api_version, start, end)
            finally:
                client.close()

        return read_rest
    # sacct reads -S/-E as local times: UTC makes them mean what the portal sends.
    env = {"TZ": "UTC", **({"SLURM_CONF": options["slurm_conf"]} if options.get("slurm_conf") else {})}
    run = sacctmgr_runner((accounting.get("sacct") or "sacct",), env, timeout=timeout * 3)
    return lambda start, end: read_finished_jobs_sacct(run, start, end)


def kubernetes_api(orchestrator: Orchestrator):
    """An ApiClient from the in-cluster service account or a kubeconfig (``options.kubeconfig``)."""
    options = _options(orchestrator)
    try:
        if options.get("in_cluster"):
            k8s_config.load_incluster_config()
            return k8s.ApiClient()
        return k8s_config.new_client_from_config(config_file=options.get("kubeconfig") or None)
    except (k8s_config.ConfigException, OSError) as error:
        raise CredentialError(f"kubeconfig: {error}") from error


# ------------------------------------------------------------------------------- metrics (busy time)

DEFAULT_STEP_S = 15.0
DEFAULT_CATCHUP_S = 3600.0  # after an outage, at most this much history is caught up
DEFAULT_MARGIN_S = 120.0  # re-look at samples this far behind the last round (late-written samples)


@dataclass(frozen=True)
class MetricsWindow:
    """How a metrics source's rounds step through time (``options.step_s``, ``lag_s``, ``catchup_s``,
    ``margin_s``)."""

    step_s: float
    lag_s: float
    catchup_s: float
    margin_s: float


def metrics_window(source: Orchestrator) -> MetricsWindow:
    options = _options(source)
    step = float(options.get("step_s", DEFAULT_STEP_S))
    return MetricsWindow(
        step_s=step,
        lag_s=float(options.get("lag_s", 2 * step)),
        catchup_s=float(options.get("catchup_s", DEFAULT_CATCHUP_S)),
        margin_s=float(options.get("margin_s", DEFAULT_MARGIN_S)),
    )


def covered_names(source: Orchestrator) -> list[str]:
    """The schedulers a metrics source watches by name (``options.orchestrators``); empty means all."""
    return list(_options(source).get("orchestrators") or ())


def build_prometheus_collector(source: Orchestrator, breaker: CircuitBreaker | None, secret: str = ""):  # nosec B107 - empty means no auth
    options = _options(source)
    return PrometheusCollector(
        endpoint_of(source),
        name=source.name,
        headers=auth_headers(secret, options.get("auth", "bearer")),
        metric=options.get("metric", "DCGM_FI_DEV_GPU_UTIL"),
        selector=options.get("selector", ""),
        max_points=int(options.get("max_points", 250_000)),
        timeout=float(options.get("timeout_s", 10.0)),
        breaker=breaker,
    )


# ------------------------------------------------------------------------------------------- rebalance


@dataclass(frozen=True)
class RebalanceOptions:
    """``options.rebalance`` of a scheduler; ``dry_run`` None means "not set" (the rebalancer's default)."""

    dry_run: bool | None = None
    auto_apply: bool = False
    preempt_gangs: bool = False
    target_utilization_fraction: float | None = None


def rebalance_options(orchestrator: Orchestrator) -> RebalanceOptions:
    options = dict(_options(orchestrator).get("rebalance") or {})
    return RebalanceOptions(
        dry_run=bool(options["dry_run"]) if "dry_run" in options else None,
        auto_apply=bool(options.get("auto_apply", False)),
        preempt_gangs=bool(options.get("preempt_gangs", False)),
        target_utilization_fraction=options.get("target_utilization_fraction"),
    )


def verbs_for_kind(orchestrator: Orchestrator, dry_run: bool, owned: Callable[[], int]) -> OrchestratorVerbs:
    """The rebalancer's verbs for a real Slurm, Kubernetes or Ray orchestrator (``owned`` counts the nodes
    it owns, for Ray's autoscaler bound)."""
    options = _options(orchestrator)
    rebalance = dict(options.get("rebalance") or {})
    if orchestrator.kind == Orchestrator.Kind.SLURM:
        return SlurmVerbs(
            *_slurmrestd(orchestrator),
            dry_run=dry_run,
            slurm_conf=rebalance.get("slurm_conf") or options.get("slurm_conf"),
        )
    if orchestrator.kind == Orchestrator.Kind.KUBERNETES:
        return KubernetesVerbs(kubernetes_api(orchestrator), orchestrator.name, dry_run=dry_run)
    if orchestrator.kind == Orchestrator.Kind.RAY:
        node_type = rebalance.get("ray_node_type", "gpu_worker")
        return RayVerbs(rebalance.get("autoscaler_config"), node_type, owned, dry_run=dry_run)
    raise KeyError(orchestrator.kind)


# ------------------------------------------------------------------------------------------- register


def configure(orchestrator: Orchestrator, *, kind: str, url: str, credentials_ref: str, options: dict | None) -> None:
    """Set a row's kind, endpoint and credentials reference (an empty one keeps the stored one); ``options``
    are merged into the stored ones. The caller validates (``full_clean``) and saves."""
    orchestrator.kind, orchestrator.endpoint = kind, url
    orchestrator.credentials_ref = credentials_ref or orchestrator.credentials_ref
    if not isinstance(options, dict | None):  # a merge would fail; the schema names the rule
        raise ValidationError({"options": options_problems(kind, options) or ["must be a JSON object"]})
    orchestrator.options = {**_options(orchestrator), **(options or {})}


def governance_options(orchestrator: Orchestrator) -> dict:
    """What governance reads of an orchestrator's options (docs/governance.md): its ``governance`` object, plus
    the top-level ``slurm_conf`` and ``volcano`` the collectors read too. Shapes checked on save
    (scheduling/orchestrator_options.py)."""
    options = orchestrator.options or {}
    found = dict(options.get("governance") or {})
    for key in ("slurm_conf", "volcano"):
        if key in options:
            found[key] = options[key]
    return found


def slurm_accounting_access(orchestrator: Orchestrator):
    """``(sacctmgr runner, Slurm cluster name, env)`` of a Slurm orchestrator as governance writes it: the fleet's
    own sacctmgr (``governance.sacctmgr``), its ``slurm_conf`` as ``SLURM_CONF``, its ``governance.cluster``."""
    options = governance_options(orchestrator)
    env = {"SLURM_CONF": options["slurm_conf"]} if options.get("slurm_conf") else None
    run = sacctmgr_runner((options.get("sacctmgr", "sacctmgr"),), env)
    return run, options.get("cluster", orchestrator.name), env


GOVERNANCE_MODES = ("auto", "review")


@transaction.atomic
def set_governance_mode(orchestrator_id: int, mode: str, *, by, reason: str) -> Orchestrator:
    """Switch how governance rounds act on an orchestrator: ``auto`` applies each round's changes, ``review``
    waits for an admin's approval of each plan. Audited with who and why, like every policy change."""
    if mode not in GOVERNANCE_MODES:
        raise ValidationError({"mode": f"one of {', '.join(GOVERNANCE_MODES)}, got {mode!r}"})
    reason = require_reason(reason)
    orchestrator = Orchestrator.objects.select_for_update().get(pk=orchestrator_id)
    options = dict(_options(orchestrator))
    options["governance"] = {**(options.get("governance") or {}), "mode": mode}
    orchestrator.options = options
    orchestrator.full_clean()
    stamp_author(orchestrator, by=by, reason=reason)
    orchestrator.save()
    return orchestrator
