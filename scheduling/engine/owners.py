"""Whose workload is it: the orchestrators' names for a submitter mapped to a portal username.

Each orchestrator names the submitter its own way. A collector keeps every name it sees as a **claim**
(``Claim``: a kind of name and the name), most specific first:

- Slurm: the job's user (``slurm_user``);
- Kubernetes: the pod's ``gpuportal.io/user`` label (``kubernetes_label``), then its service account as
  ``namespace/name`` (``kubernetes_service_account``), then its namespace (``kubernetes_namespace``);
- Ray: the job submission's ``metadata`` ``user`` or ``submitter`` (``ray_submitter``).

**Default**: a Slurm user, a label or a Ray submitter that is a portal username is that user (the common
case where the cluster and the portal read one directory). Service accounts and namespaces are shared by
nature, so they belong to someone only by an override.

**Overrides** (``Override``, admin-edited): "on orchestrator O (or on all), the name N of kind K is portal
user U". They win over the default, the orchestrator's own before the fleet-wide one. Several users
claiming one name (a shared cluster account, as governance allows) is ambiguous: the claim maps to nobody
rather than to an arbitrary one of them, and the next claim is tried.

The same overrides give governance its cluster user per portal user (``cluster_names``): one mapping
both ways. Pure: no Django, no I/O.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from functools import lru_cache

from scheduling.engine.governance_state import GovernanceInputError, InputProblem


class NameKind(StrEnum):
    SLURM_USER = "slurm_user"
    KUBERNETES_LABEL = "kubernetes_label"
    KUBERNETES_SERVICE_ACCOUNT = "kubernetes_service_account"
    KUBERNETES_NAMESPACE = "kubernetes_namespace"
    RAY_SUBMITTER = "ray_submitter"


# The kinds whose names are personal: they default to the portal user of that name.
PERSONAL = frozenset({NameKind.SLURM_USER, NameKind.KUBERNETES_LABEL, NameKind.RAY_SUBMITTER})
USER_LABEL = "gpuportal.io/user"
RAY_SUBMITTER_KEYS = ("user", "submitter")

# What each orchestrator accepts as a name of that kind (Slurm/POSIX user names, DNS-1123 labels, Kubernetes
# label values), so an override that can never match is refused when it is written, not silently unused.
_SLURM_USER = r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}"
_DNS_LABEL = r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?"
_DNS_SUBDOMAIN = r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?"
NAME_RULES: dict[NameKind, tuple[re.Pattern[str], str]] = {
    NameKind.SLURM_USER: (re.compile(_SLURM_USER), "a Slurm user name (letters, digits, _ . -; at most 64)"),
    NameKind.KUBERNETES_LABEL: (
        re.compile(r"([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)"),
        "a Kubernetes label value (at most 63 letters, digits, - _ . ; alphanumeric at both ends)",
    ),
    NameKind.KUBERNETES_SERVICE_ACCOUNT: (
        re.compile(f"{_DNS_LABEL}/{_DNS_SUBDOMAIN}"),
        "namespace/name of a service account (lower-case DNS names)",
    ),
    NameKind.KUBERNETES_NAMESPACE: (re.compile(_DNS_LABEL), "a namespace (a lower-case DNS label)"),
    NameKind.RAY_SUBMITTER: (re.compile(r"\S(.{0,198}\S)?"), "a submitter name (1-200 characters, no edge spaces)"),
}


@dataclass(frozen=True, slots=True)
class Claim:
    """One name an orchestrator gives a workload's submitter."""

    kind: NameKind
    name: str


@dataclass(frozen=True, slots=True)
class Override:
    """On ``orchestrator`` ("" = every orchestrator) the ``kind`` name ``name`` is portal user ``username``."""

    kind: NameKind
    name: str
    username: str
    orchestrator: str = ""


@dataclass(frozen=True, slots=True)
class Owner:
    """The portal user a workload maps to ("" for nobody) and why."""

    username: str
    reason: str


def name_problem(kind: NameKind, name: str) -> str:
    """Why ``name`` cannot be a name of ``kind`` ("" when it can)."""
    pattern, rule = NAME_RULES[kind]
    return "" if pattern.fullmatch(name) else f"{name!r} is not {rule}"


def override_problems(override: Override, usernames: frozenset[str]) -> list[InputProblem]:
    problems = []
    if override.username not in usernames:
        problems.append(InputProblem("user", f"{override.username!r} is not a portal user"))
    if message := name_problem(override.kind, override.name):
        problems.append(InputProblem("name", message))
    return problems


class OwnerMap:
    """Usernames and overrides, indexed for one lookup per claim (a collection round maps thousands)."""

    def __init__(self, usernames: Iterable[str], overrides: Iterable[Override] = ()) -> None:
        self.usernames = frozenset(usernames)
        self.overrides = tuple(overrides)
        problems = [p for o in self.overrides for p in override_problems(o, self.usernames)]
        if problems:
            raise GovernanceInputError(problems)
        self._claimants: dict[tuple[str, NameKind, str], set[str]] = defaultdict(set)
        for o in self.overrides:
            self._claimants[(o.orchestrator, o.kind, o.name)].add(o.username)

    def owner(self, claims: Iterable[Claim], orchestrator: str) -> Owner:
        """The first claim (most specific first) that names exactly one portal user decides."""
        passed = []
        for claim in claims:
            if not claim.name:
                continue
            found = self._resolve(claim, orchestrator)
            if found.username:
                return found
            passed.append(found.reason)
        return Owner("", "; ".join(passed) or "the orchestrator names no submitter")

    def _resolve(self, claim: Claim, orchestrator: str) -> Owner:
        said = f"{claim.kind.value} {claim.name}"
        for scope, where in ((orchestrator, f"on {orchestrator}"), ("", "fleet-wide")):
            claimants = self._claimants.get((scope, claim.kind, claim.name))
            if claimants and len(claimants) == 1:
                (username,) = claimants
                return Owner(username, f"{said} is {username} (override {where})")
            if claimants:
                return Owner("", f"{said} is claimed by {', '.join(sorted(claimants))} (override {where}): nobody's")
        if claim.kind in PERSONAL and claim.name in self.usernames:
            return Owner(claim.name, f"{said} is the portal user of that name")
        return Owner("", f"{said} is no portal user")

    def cluster_names(self, kind: NameKind, orchestrator: str) -> dict[str, str]:
        """portal username -> its ``kind`` name on ``orchestrator`` where an override says it differs (the
        orchestrator's own override before a fleet-wide one; among several, the first by name)."""
        names: dict[str, str] = {}
        for scope in (orchestrator, ""):
            for o in sorted(self.overrides, key=lambda o: o.name):
                if o.kind is kind and o.orchestrator == scope:
                    names.setdefault(o.username, o.name)
        return names


def kubernetes_claims(
    labels: dict[str, str], namespace: str, service_account: str, label_keys: Sequence[str] = (USER_LABEL,)
) -> tuple[Claim, ...]:
    """A pod's claims: its user label (the first of ``label_keys`` set), then its service account, then its
    namespace."""
    label = next((labels[key] for key in label_keys if labels.get(key)), "")
    return _kubernetes_claims(label, namespace, service_account)


@lru_cache(maxsize=65536)
def _kubernetes_claims(label: str, namespace: str, service_account: str) -> tuple[Claim, ...]:
    """One tuple per (user, namespace, service account): a watched cluster's 37,500 gangs hold a few hundred
    distinct ones, and every workload of the round keeps its claims (issue 35's memory goal)."""
    return tuple(
        Claim(kind, name)
        for kind, name in (
            (NameKind.KUBERNETES_LABEL, label),
            (NameKind.KUBERNETES_SERVICE_ACCOUNT, f"{namespace}/{service_account}" if service_account else ""),
            (NameKind.KUBERNETES_NAMESPACE, namespace),
        )
        if name
    )


def ray_claims(metadata: dict[str, object], keys: Sequence[str] = RAY_SUBMITTER_KEYS) -> tuple[Claim, ...]:
    """A Ray job submission's claims: the first of ``metadata``'s ``keys`` that is set."""
    for key in keys:
        value = metadata.get(key)
        if value:
            return (Claim(NameKind.RAY_SUBMITTER, str(value)),)
    return ()
