"""Native reclaim on Slurm: the QOS design that lets slurmctld itself requeue a borrower when an owner's job
arrives (``PreemptType=preempt/qos``, ``PreemptMode=REQUEUE`` in slurm.conf; docs/governance.md, "Native reclaim
on Slurm").

Each team with a guarantee on the cluster gets a *guaranteed* QOS, ``<team>-guaranteed``: ``GrpTRES=gres/gpu=<its
own guarantee there>`` (so only work within the guarantee runs in it) and ``Preempt=<borrow QOS>``. Every team's
account may use the *borrow* QOS (``scavenger`` by default: preemptible, requeued, never inside its minimum runtime
``PreemptExemptTime``). A team with a guarantee submits to its guaranteed QOS by default; a team without one to the
borrow QOS, so whatever it runs is borrowed and slurmctld may requeue it. Work beyond a guarantee is submitted with
``--qos=<borrow QOS>`` (it runs on idle GPUs and is requeued when an owner needs them back).

Pure: guarantees in, the QOSes and each account's QOS list and default out.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

DEFAULT_BORROW_QOS = "scavenger"
GUARANTEED_SUFFIX = "-guaranteed"
# Preempt= decides who preempts whom; the priorities rank the owners' pending jobs first (PriorityWeightQOS).
GUARANTEED_PRIORITY = 1000
BORROW_PRIORITY = 0
QOS_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}$")


@dataclass(frozen=True, slots=True)
class PreemptionQos:
    """A QOS as governance writes it: ``grp_gpus`` None = no GPU cap; ``preempt`` the QOSes it may preempt;
    ``preempt_mode`` how its own jobs are preempted ("" = the cluster's ``PreemptMode``)."""

    name: str
    priority: int
    preempt: tuple[str, ...] = ()
    preempt_mode: str = ""
    grp_gpus: int | None = None
    preempt_exempt_s: int = 0


@dataclass(frozen=True, slots=True)
class AccountQos:
    """The QOSes a team's account (and its users' associations) may use, and the one its jobs get by default."""

    account: str
    qos: tuple[str, ...]
    default_qos: str


@dataclass(frozen=True, slots=True)
class PreemptionDesign:
    qos: tuple[PreemptionQos, ...]
    accounts: tuple[AccountQos, ...]


def guaranteed_qos(team: str) -> str:
    return f"{team}{GUARANTEED_SUFFIX}"


def preemption_design(guarantees: Mapping[str, float], accounts: Iterable[str], *,
                      borrow_qos: str = DEFAULT_BORROW_QOS, min_runtime_s: float = 0.0) -> PreemptionDesign:
    """The QOSes and account settings for ``accounts`` (the teams' Slurm accounts on the cluster) given each team's
    own guarantee there (``guarantees``: team -> GPUs; a fraction is rounded up, a whole GPU being the unit)."""
    if not QOS_NAME.match(borrow_qos):
        raise ValueError(f"borrow_qos: a Slurm QOS name (letters, digits, _ . -), got {borrow_qos!r}")
    if min_runtime_s < 0:
        raise ValueError(f"min_runtime_s: must be >= 0, got {min_runtime_s}")
    borrow = PreemptionQos(borrow_qos, BORROW_PRIORITY, preempt_mode="requeue",
                           preempt_exempt_s=math.ceil(min_runtime_s))
    owned = {team: math.ceil(gpus) for team, gpus in guarantees.items() if gpus > 0}
    qos = [borrow] + [
        PreemptionQos(guaranteed_qos(team), GUARANTEED_PRIORITY, preempt=(borrow_qos,), grp_gpus=gpus)
        for team, gpus in sorted(owned.items())
    ]
    settings = []
    for account in sorted(set(accounts)):
        if account in owned:
            mine = guaranteed_qos(account)
            settings.append(AccountQos(account, (mine, borrow_qos), mine))
        else:
            settings.append(AccountQos(account, (borrow_qos,), borrow_qos))
    return PreemptionDesign(tuple(qos), tuple(settings))
