"""What ``Orchestrator.options`` may hold, per kind: one JSON Schema for every key the collectors, the busy-time
scraper and the rebalancer's actuators read (all through ``services/orchestrators.py``; docs/utilisation.md and
docs/rebalancer.md describe them).

Checked on every write (the model's ``clean``, so the admin and ``register_orchestrator``; the API's serializer)
because the readers trust the shape: a string, a null or ``"timeout_s": "fast"`` used to be stored and then made
every scrape raise. Unknown keys are refused too: a misspelt ``"dry-run"`` would otherwise leave a real
orchestrator's rebalancing on its default without a word. Pure (no Django), so any layer may ask.
"""

import json
from typing import Any

from django.core.exceptions import ValidationError
from jsonschema import Draft202012Validator

from scheduling.validators import check_credentials_file, check_slurm_command

STRING = {"type": "string"}
FLAG = {"type": "boolean"}
SECONDS = {"type": "number", "exclusiveMinimum": 0, "maximum": 86_400}
SECONDS_OR_ZERO = {"type": "number", "minimum": 0, "maximum": 7 * 86_400}
PATH = {"type": "string", "minLength": 1, "maxLength": 1024}

REBALANCE_COMMON = {
    "dry_run": FLAG,
    "auto_apply": FLAG,
    "preempt_gangs": FLAG,
    "target_utilization_fraction": {"type": "number", "exclusiveMinimum": 0, "maximum": 1},
}
# Governance enforced on the cluster (docs/governance.md): auto applies each round's changes, review
# (the default) stores them as a plan an admin approves; the rest is how the portal's teams map onto the kind.
GOVERNANCE_COMMON = {"mode": {"enum": ["auto", "review"]}, "gpu_model": STRING}
NAME = {"type": "string", "pattern": r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}$"}  # a Slurm account/user name
DNS_LABEL = r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$"  # a Kubernetes namespace name (RFC 1123 label)
GOVERNANCE = {
    "slurm": {
        "cluster": NAME,
        "root_account": NAME,
        "typed_gres": FLAG,
        "sacctmgr": PATH,  # the fleet's own sacctmgr (a path, or a wrapper such as a chroot's)
    },
    "kubernetes": {
        "namespaces": {
            "type": "object",
            "additionalProperties": {"type": "array", "items": {"type": "string", "pattern": DNS_LABEL}},
        },
        "kueue_cohort": STRING,
        "kueue_flavor": STRING,
    },
    "ray": {},
}
# Reclaim of borrowed GPUs for teams below their guarantee (docs/governance.md, "Reclaim"): off, native (the
# orchestrator's own reclaim acts; the portal records what it would do, or reclaims itself where the orchestrator
# has no native reclaim: Ray, Kubernetes without Volcano), review (a plan an admin approves, the
# default) or auto; the engine's minimum victim runtime and the grace a claim waits; a dry run only describes the
# requeue/eviction/stop; Kubernetes evictions may override the pods' own termination grace.
RECLAIM = {
    "type": "object",
    "properties": {
        "mode": {"enum": ["off", "native", "review", "auto"]},
        "min_runtime_s": SECONDS_OR_ZERO,
        "grace_s": SECONDS_OR_ZERO,
        "dry_run": FLAG,
        "eviction_grace_s": {"type": "integer", "minimum": 0, "maximum": 86_400},
        "borrow_qos": NAME,  # Slurm native mode: the preemptible QOS borrowed work runs in (default scavenger)
    },
    "additionalProperties": False,
}
# One scrape of this source may take this long in all (its Celery task's hard limit; its HTTP calls end sooner:
# services/collection.scrape_limits), so one slow cluster among many holds one collector slot for that long only.
SCRAPE_TIME_LIMIT = {"type": "integer", "minimum": 3, "maximum": 3600}
COLLECTOR_COMMON = {
    "scrape_time_limit_s": SCRAPE_TIME_LIMIT,
    "timeout_s": SECONDS,
    "team_aliases": {"type": "object", "additionalProperties": STRING},
}


def _source(
    properties: dict[str, Any], rebalance: dict[str, Any] | None = None, governance: dict[str, Any] | None = None
) -> dict[str, Any]:
    """A scheduler's options: the collector's common keys, its own, the rebalancer's ``rebalance`` object and
    the ``governance`` object."""
    governance_object = {
        "type": "object",
        "properties": {**GOVERNANCE_COMMON, **(governance or {})},
        "additionalProperties": False,
    }
    rebalance_object = {
        "type": "object",
        "properties": {**REBALANCE_COMMON, **(rebalance or {})},
        "additionalProperties": False,
    }
    return {
        "type": "object",
        "properties": {
            **COLLECTOR_COMMON,
            **properties,
            "rebalance": rebalance_object,
            "governance": governance_object,
            "reclaim": RECLAIM,
        },
        "additionalProperties": False,
    }


SCHEMAS: dict[str, dict[str, Any]] = {
    "slurm": _source(
        {
            "user": {"type": "string", "minLength": 1},  # sent with the JWT as X-SLURM-USER-NAME
            "api_version": {"type": "string", "pattern": r"^v0\.0\.[0-9]+$"},  # the path slurmrestd serves
            "team_field": {"enum": ["account", "user"]},
            "slurm_conf": PATH,
            # Finished jobs from slurmdbd into usage history (docs/governance.md, "Usage from Slurm accounting").
            "accounting": {"type": "object", "properties": {"sacct": PATH}, "additionalProperties": False},
        },
        {"slurm_conf": PATH},
        GOVERNANCE["slurm"],
    ),
    "kubernetes": _source(
        # admission_bypass: what happens to a GPU pod created while the webhook was down (docs/routing.md).
        {"volcano": FLAG, "in_cluster": FLAG, "kubeconfig": PATH, "team_label": STRING,
         "admission_bypass": {"enum": ["report", "label", "evict"]}},
        None,
        GOVERNANCE["kubernetes"],
    ),
    "ray": _source({}, {"ray_node_type": {"type": "string", "minLength": 1}, "autoscaler_config": PATH}),
    "prometheus": {
        "type": "object",
        "properties": {
            "metric": {"type": "string", "pattern": r"^[a-zA-Z_:][a-zA-Z0-9_:]*$"},  # a Prometheus metric name
            "selector": STRING,
            "step_s": SECONDS,
            "lag_s": SECONDS_OR_ZERO,
            "catchup_s": SECONDS_OR_ZERO,
            "margin_s": SECONDS_OR_ZERO,
            "max_points": {"type": "integer", "minimum": 1, "maximum": 10_000_000},
            "orchestrators": {"type": "array", "items": {"type": "string", "minLength": 1}},
            "auth": {"enum": ["bearer", "basic"]},
            "timeout_s": SECONDS,
            "scrape_time_limit_s": SCRAPE_TIME_LIMIT,
        },
        "additionalProperties": False,
    },
}
VALIDATORS = {kind: Draft202012Validator(schema) for kind, schema in SCHEMAS.items()}


def options_problems(kind: str, options: object) -> list[str]:
    """Each way ``options`` breaks the schema of ``kind``, as ``options.<path>: <rule>``; empty when it fits.
    An unknown kind has no schema here (the kind's own validation says so)."""
    validator = VALIDATORS.get(kind)
    if validator is None:
        return []
    errors = sorted(validator.iter_errors(options), key=lambda e: [str(p) for p in e.absolute_path])
    return [_describe(kind, error) for error in errors] or _path_problems(options)


def mapping_problems(options: object, teams: set[str]) -> list[str]:
    """The team -> namespaces mapping (``governance.namespaces``) names teams of the portal (``teams``: their
    slugs), and each namespace for one team only: caught on save, before any round writes anything."""
    governance = options.get("governance") if isinstance(options, dict) else None
    mapping = governance.get("namespaces") if isinstance(governance, dict) else None
    if not isinstance(mapping, dict):
        return []
    where = "options.governance.namespaces"
    problems = [f"{where}.{team}: {team!r} is not a team of the portal" for team in sorted(set(mapping) - teams)]
    owner: dict[str, str] = {}
    for team, namespaces in sorted(mapping.items()):
        for namespace in namespaces if isinstance(namespaces, list) else ():
            if owner.setdefault(namespace, team) != team:
                problems.append(f"{where}.{team}: namespace {namespace!r} is mapped to {owner[namespace]!r} already")
    return problems


# Files the worker reads for an orchestrator, held where credentials files may lie (scheduling/validators.py): a
# kubeconfig holds a certificate or token and names where it is sent; slurm.conf is read by sacctmgr, scontrol
# and sacct, which echo its lines in their errors (to /governance/ and the database): a free path reads any file.
CREDENTIAL_PATHS = (("kubeconfig",), ("slurm_conf",), ("rebalance", "slurm_conf"))
# Programs the worker runs: held to their own name inside GPUPORTAL_SLURM_BIN_DIRS.
SLURM_COMMANDS = ((("governance", "sacctmgr"), "sacctmgr"), (("accounting", "sacct"), "sacct"))


def _path_problems(options: object) -> list[str]:
    problems: list[str] = []
    for keys in CREDENTIAL_PATHS:
        problems += _checked(options, keys, check_credentials_file)
    for keys, command in SLURM_COMMANDS:
        problems += _checked(options, keys, lambda value, command=command: check_slurm_command(value, command))
    return problems


def _checked(options: object, keys: tuple[str, ...], check) -> list[str]:
    value = options
    for key in keys:
        value = value.get(key) if isinstance(value, dict) else None
    if not value:
        return []
    try:
        check(value)
    except ValidationError as error:
        return [f"options.{'.'.join(keys)}: {message}" for message in error.messages]
    return []


def _describe(kind: str, error) -> str:
    where = ".".join(["options", *(str(p) for p in error.absolute_path)])
    if error.validator == "additionalProperties":
        known = ", ".join(sorted(error.schema["properties"]))
        unknown = ", ".join(sorted(set(error.instance) - set(error.schema["properties"])))
        return f"{where}: unknown key {unknown} for a {kind} source (known: {known})"
    if error.validator == "type" and not error.absolute_path:
        return f"{where}: must be a JSON object of settings, got {json.dumps(error.instance)[:40]}"
    if error.validator == "pattern" and error.validator_value == DNS_LABEL:
        rule = "a namespace name is at most 63 lower-case letters, digits and '-', starting and ending alphanumeric"
        return f"{where}: {json.dumps(error.instance)[:70]} is not a namespace name ({rule})"
    return f"{where}: {error.message}"
