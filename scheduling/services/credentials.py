"""An orchestrator's secret, read where its reference points, and masked in every error the portal keeps.

The reference is checked again here, at resolve time, with the same rules as when it was saved
(scheduling/validators.py): a symlink swapped in since, or a row written around the model, must not make
the worker read a file outside the credentials directories.
"""

import os
from pathlib import Path

from django.core.exceptions import ValidationError

from scheduling.collectors import CollectorError
from scheduling.models import Orchestrator
from scheduling.redact import redact, remember
from scheduling.validators import CredentialsRef, check_credentials_ref, check_endpoint


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


def secrets_of(*orchestrators: Orchestrator) -> list[str]:
    """The secrets of these orchestrators that resolve today (one that does not was never sent)."""
    found = []
    for orchestrator in orchestrators:
        try:
            found.append(resolve_secret(orchestrator.credentials_ref))
        except CredentialError:
            continue
    return found


def masked(text: str, *orchestrators: Orchestrator) -> str:
    """``text`` safe to store or log: the orchestrators' secrets masked in every spelling."""
    return redact(text, secrets_of(*orchestrators))


def endpoint_of(orchestrator: Orchestrator) -> str:
    """The endpoint the worker may send the secret to, checked again at use (rows written around the model)."""
    try:
        return check_endpoint(orchestrator.endpoint)
    except ValidationError as error:
        raise RefusedEndpoint(f"endpoint: {' '.join(error.messages)}") from None


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
