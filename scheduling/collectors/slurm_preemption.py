"""Write native reclaim's QOS design (``engine/slurm_preemption.py``) with ``sacctmgr -i``, and read whether
slurmctld preempts by QOS at all (``scontrol show config``: ``PreemptType``).

Idempotent like ``SlurmAccountingWriter``: each QOS and association is read first and only the settings that
differ are written; every command run is returned, so the caller can audit it. QOSes are written before the
associations that name them. Only the listed settings are managed: a QOS's other limits, and QOSes an account
already allows (``normal``), are left as the site set them.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Mapping, Sequence

from scheduling.engine.governance_types import GPU_TRES
from scheduling.engine.slurm_preemption import AccountQos, PreemptionDesign, PreemptionQos

from .errors import SourceUnavailable
from .slurm_accounting import UNLIMITED, Runner, parse_grp_tres

QOS_FORMAT = "name,priority,preempt,preemptmode,grptres,preemptexempttime"
ASSOC_QOS_FORMAT = "account,user,qos,defaultqos"
_PREEMPT_TYPE = re.compile(r"^PreemptType\s*=\s*(\S+)", re.MULTILINE)
_DURATION = re.compile(r"^(?:(\d+)-)?(?:(\d+):)?(\d+):(\d+)$")


def _seconds(text: str) -> int:
    """``PreemptExemptTime`` as sacctmgr prints it (``00:10:00``, ``1-00:00:00``); 0 when unset."""
    match = _DURATION.match(text.strip())
    if not match:
        return 0
    days, hours, minutes, seconds = (int(part or 0) for part in match.groups())
    return ((days * 24 + hours) * 60 + minutes) * 60 + seconds


def _duration(seconds: int) -> str:
    hours, rest = divmod(seconds, 3600)
    return f"{hours:02d}:{rest // 60:02d}:{rest % 60:02d}"


def parse_qos(text: str) -> dict[str, PreemptionQos]:
    """``sacctmgr -n -P show qos format=QOS_FORMAT`` -> name -> what governance manages of it."""
    found = {}
    for line in text.splitlines():
        parts = line.split("|")
        if len(parts) < 6 or not parts[0]:
            continue
        name, priority, preempt, mode, grp, exempt = parts[:6]
        gpus = dict(parse_grp_tres(grp)).get(GPU_TRES)
        found[name] = PreemptionQos(
            name, int(priority or 0), tuple(sorted(p for p in preempt.split(",") if p)),
            "" if mode in ("", "cluster") else mode.lower(), gpus, _seconds(exempt))
    return found


def qos_argv(wanted: PreemptionQos, current: PreemptionQos | None) -> list[str]:
    """``modify qos`` setting what differs from ``current`` (a QOS just added reads as all defaults)."""
    current = current or PreemptionQos(wanted.name, 0)
    sets = []
    if wanted.priority != current.priority:
        sets.append(f"priority={wanted.priority}")
    if tuple(sorted(wanted.preempt)) != current.preempt:
        sets.append(f"preempt={','.join(sorted(wanted.preempt))}")
    if wanted.preempt_mode and wanted.preempt_mode != current.preempt_mode:
        sets.append(f"preemptmode={wanted.preempt_mode}")
    if wanted.grp_gpus != current.grp_gpus:
        sets.append(f"grptres={GPU_TRES}={UNLIMITED if wanted.grp_gpus is None else wanted.grp_gpus}")
    if wanted.preempt_exempt_s != current.preempt_exempt_s:
        value = _duration(wanted.preempt_exempt_s) if wanted.preempt_exempt_s else UNLIMITED
        sets.append(f"preemptexempttime={value}")
    return ["-i", "modify", "qos", "where", f"name={wanted.name}", "set", *sets] if sets else []


class SlurmPreemptionWriter:
    """The QOSes and account QOS settings of native reclaim, on one cluster (``run`` is ``sacctmgr_runner``)."""

    def __init__(self, run: Runner, cluster: str, *, dry_run: bool = False) -> None:
        self.run = run
        self.cluster = cluster
        self.dry_run = dry_run

    def apply(self, design: PreemptionDesign) -> list[str]:
        """Make the cluster hold ``design``; the sacctmgr commands run (empty when it already did)."""
        done: list[str] = []
        existing = parse_qos(self.run(["-n", "-P", "show", "qos", f"format={QOS_FORMAT}"]))
        for qos in design.qos:
            if qos.name not in existing:
                done.append(self._run(["-i", "add", "qos", qos.name]))
            argv = qos_argv(qos, existing.get(qos.name))
            if argv:
                done.append(self._run(argv))
        rows = [line.split("|") for line in self.run(
            ["-n", "-P", "show", "assoc", f"cluster={self.cluster}", f"format={ASSOC_QOS_FORMAT}"]).splitlines()]
        for account in design.accounts:
            done += self._account(account, [row for row in rows if len(row) >= 4 and row[0] == account.account])
        return done

    def _account(self, wanted: AccountQos, rows: list[list[str]]) -> list[str]:
        """The account's association and each of its users' (a user association keeps the QOSes it had when it
        was made, so each is set too). An account the cluster does not have is left to governance."""
        done = []
        for parts in rows:
            user, allowed, default = parts[1], set(filter(None, parts[2].split(","))), parts[3]
            missing = [q for q in wanted.qos if q not in allowed]
            sets = ([f"qos+={','.join(missing)}"] if missing else []) + (
                [f"defaultqos={wanted.default_qos}"] if default != wanted.default_qos else [])
            if not sets:
                continue
            where = (["user", "where", f"name={user}", f"account={wanted.account}"] if user
                     else ["account", "where", f"name={wanted.account}"])
            done.append(self._run(["-i", "modify", *where, f"cluster={self.cluster}", "set", *sets]))
        return done

    def _run(self, argv: list[str]) -> str:
        """Run a write (a dry run only describes it)."""
        if not self.dry_run:
            self.run(argv)
        return "sacctmgr " + " ".join(argv)


def preempt_type(env: Mapping[str, str] | None = None, scontrol: Sequence[str] = ("scontrol",),
                 timeout: float = 30.0) -> str:
    """slurmctld's ``PreemptType`` (``preempt/qos``, ``preempt/none``...), from ``scontrol show config``."""
    try:
        done = subprocess.run([*scontrol, "show", "config"], env={**os.environ, **(env or {})},
                              capture_output=True, text=True, timeout=timeout, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SourceUnavailable(f"scontrol show config: {exc}") from exc
    if done.returncode != 0:
        raise SourceUnavailable(f"scontrol show config -> {done.returncode}: {done.stderr.strip()}")
    match = _PREEMPT_TYPE.search(done.stdout)
    return match.group(1) if match else "preempt/none"
