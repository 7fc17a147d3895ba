"""Where an orchestrator's secret may be read from, and where the worker may send it: one check for every way in.

The database holds only a reference to a secret (``env:NAME`` or ``file:/path``); the worker reads it and
sends it to the orchestrator's endpoint. If an admin could name any variable or file, the worker would
send ``SECRET_KEY`` or ``/etc/shadow`` to a server of their choosing. So a reference may only name a
variable whose name starts with ``GPUPORTAL_SECRET_`` or a file inside one of
``GPUPORTAL_CREDENTIALS_DIRS`` (after resolving ``..`` and symlinks), and an endpoint must be http(s).

The model (``Orchestrator.clean``: admin, services, the register command), the API serializer and the
worker at resolve time (a symlink may have been swapped in since) all call these functions; each raises
Django's ``ValidationError`` with a message that names the rule.
"""

import ipaddress
import re
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from django.conf import settings
from django.core.exceptions import ValidationError

from scheduling.engine.types import WorkloadKind

ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# Fixed, not configurable: a setting could be emptied, and every variable would be readable again.
ENV_PREFIX = "GPUPORTAL_SECRET_"
ENDPOINT_SCHEMES = ("http", "https")
DEMO_SCHEME = "demo"  # served in-process by the demo federation: nothing is fetched, nothing is sent


@dataclass(frozen=True)
class CredentialsRef:
    kind: str  # "env" or "file"
    target: str  # the variable name, or the resolved absolute path


def credential_dirs() -> list[Path]:
    return [Path(d).resolve() for d in settings.GPUPORTAL_CREDENTIALS_DIRS]


def check_credentials_ref(reference: str) -> CredentialsRef | None:
    """The parsed reference (``None`` for no credentials), or ``ValidationError`` naming the rule broken."""
    if not reference:
        return None
    kind, _, target = reference.partition(":")
    if kind == "env":
        return CredentialsRef("env", _check_env_name(target))
    if kind == "file":
        return CredentialsRef("file", str(check_credentials_file(target)))
    raise ValidationError(
        "must be env:NAME or file:/path (where the secret lives; the secret itself is never stored)",
        code="reference_kind",
    )


def _check_env_name(name: str) -> str:
    if not ENV_NAME.fullmatch(name) or not name.startswith(ENV_PREFIX) or name == ENV_PREFIX:
        raise ValidationError(
            f"env: only environment variables named {ENV_PREFIX}<NAME> may hold credentials (got {name!r})",
            code="env_prefix",
        )
    return name


def check_credentials_file(target: str) -> Path:
    """The resolved path, if it lies inside a credentials directory (``..`` and symlinks followed first).
    Also for a Kubernetes source's ``options.kubeconfig``: a kubeconfig holds a client certificate or token
    and names the server it is sent to, so a free path would send any kubeconfig on the worker anywhere."""
    dirs = credential_dirs()
    allowed = ", ".join(str(d) for d in dirs)
    path = Path(target)
    if "\x00" in target or not path.is_absolute():
        raise ValidationError(f"file: needs an absolute path inside {allowed}", code="file_path")
    resolved = path.resolve()  # collapses "..", follows every symlink that exists today
    if not any(resolved != d and resolved.is_relative_to(d) for d in dirs):
        raise ValidationError(
            f"file: credentials files must lie inside {allowed} (set GPUPORTAL_CREDENTIALS_DIRS); "
            f"{target} resolves to {resolved}",
            code="file_outside",
        )
    return resolved


def check_endpoint(url: str) -> str:
    """An absolute http(s) URL with a host (or the demo federation's ``demo://name``), not a link-local address
    (169.254.0.0/16, fe80::/10: a cloud's metadata service, which hands out the node's credentials) and not this
    machine (loopback, unspecified, ``localhost``) unless ``GPUPORTAL_ALLOW_LOOPBACK_ENDPOINTS`` says a service
    really runs there: the worker sends the orchestrator's secret to this address."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises on a port that is not a number in range
    except ValueError as error:
        raise ValidationError(f"must be an http(s) URL ({error})", code="endpoint") from error
    if parts.scheme == DEMO_SCHEME and parts.netloc:
        return url
    if parts.scheme not in ENDPOINT_SCHEMES or not parts.hostname or any(c.isspace() for c in url):
        raise ValidationError(
            f"must be an http:// or https:// URL with a host (got scheme {parts.scheme or 'none'!r})", code="endpoint"
        )
    _check_service_address(parts.hostname)
    return url


def _check_service_address(host: str) -> None:
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        local = host.rstrip(".").lower() == "localhost" or host.rstrip(".").lower().endswith(".localhost")
        address = None
    else:
        if address.version == 6 and address.ipv4_mapped is not None:
            address = address.ipv4_mapped
        local = address.is_loopback or address.is_unspecified
    if address is not None and address.is_link_local:
        raise ValidationError(
            f"{host} is a link-local address (a cloud metadata service lives there): never an orchestrator",
            code="endpoint_link_local",
        )
    if local and not settings.GPUPORTAL_ALLOW_LOOPBACK_ENDPOINTS:
        raise ValidationError(
            f"{host} is this machine (loopback): refused unless GPUPORTAL_ALLOW_LOOPBACK_ENDPOINTS=1 says an "
            "orchestrator's API really listens here",
            code="endpoint_loopback",
        )


def check_slurm_command(value: str, command: str) -> str:
    """The ``sacctmgr`` or ``sacct`` the worker runs: the bare name (found on the worker's PATH) or an absolute
    path of that name inside ``GPUPORTAL_SLURM_BIN_DIRS`` (symlinks followed): an admin must not make the worker
    run any program it can reach."""
    if value == command:
        return value
    dirs = [Path(d).resolve() for d in settings.GPUPORTAL_SLURM_BIN_DIRS]
    allowed = ", ".join(str(d) for d in dirs) or "no directory (GPUPORTAL_SLURM_BIN_DIRS is empty)"
    path = Path(value)
    rule = f"{command!r} (found on the worker's PATH) or an absolute path to {command} inside {allowed}"
    if "\x00" in value or not path.is_absolute() or path.name != command:
        raise ValidationError(f"must be {rule}; got {value[:200]!r}", code="slurm_command")
    resolved = path.resolve()
    if not any(resolved.parent == d or resolved.parent.is_relative_to(d) for d in dirs):
        raise ValidationError(f"must be {rule}; {value[:200]} resolves to {resolved}", code="slurm_command")
    return value


def validate_serving_kinds(value: object) -> None:
    """A team's serving entitlement: a list of distinct workload kinds (``Team.serving_kinds``)."""
    allowed = [kind.value for kind in WorkloadKind]
    if not isinstance(value, list) or not all(isinstance(kind, str) for kind in value):
        raise ValidationError("serving_kinds must be a list of workload kinds", code="serving_kinds")
    unknown = sorted(set(value) - set(allowed))
    if unknown:
        raise ValidationError(
            f"serving_kinds: {', '.join(unknown)} not one of {', '.join(allowed)}", code="serving_kinds"
        )
    if len(set(value)) != len(value):
        raise ValidationError("serving_kinds: each kind once", code="serving_kinds")
