"""Slurm accounting: read and write the associations that enforce governance, and read finished jobs.

Reading: slurmrestd's slurmdb endpoints (``/slurmdb/v0.0.38/associations`` on 22.05,
``/slurmdb/v0.0.40``-``v0.0.42`` on 23.x/24.x), or ``sacctmgr -n -P`` where no slurmrestd with the slurmdb
plugin is at hand. Both give :class:`SlurmAccount` / :class:`SlurmUser`, the types the engine's desired
state uses, so the diff compares like with like.

Writing: ``sacctmgr -i`` on every version. slurmrestd can write associations too, but its request bodies
changed with every API version (v0.0.38's ``shares_raw``/``max.tres.total`` vs v0.0.40+'s nested numbers)
while sacctmgr's command line did not: one writer serves 22.05 and 24.11 alike, and slurmdbd validates
it the same way. Every write is idempotent: ``ensure_*`` adds what is missing, else modifies it to the
given settings; ``remove_*`` of something absent does nothing.

Finished jobs: ``/slurmdb/<version>/jobs`` or ``sacct --json`` (the same document), as
:class:`FinishedJob` with its GPU-seconds, so usage counts jobs shorter than a scrape interval.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from scheduling.engine.governance_types import GPU_TRES, SlurmAccount, SlurmUser

from .errors import MalformedResponse, SourceUnavailable
from .httpjson import JsonClient
from .slurm_wire import job_state, number

# API versions whose slurmrestd serves /slurmdb/<version>/... (22.05: dbv0.0.36-38; 23.x+: v0.0.39+).
LEGACY_SLURMDB_VERSIONS = ("v0.0.36", "v0.0.37", "v0.0.38")
SLURMDB_VERSIONS = (*LEGACY_SLURMDB_VERSIONS, "v0.0.40", "v0.0.41", "v0.0.42")
# sacctmgr's "clear this limit" value.
UNLIMITED = "-1"
ASSOC_FORMAT = "account,user,parentname,fairshare,grptres"

Runner = Callable[[Sequence[str]], str]


# ------------------------------------------------------------------------------------ sacctmgr runner


def sacctmgr_runner(
    argv_prefix: Sequence[str] = ("sacctmgr",), env: Mapping[str, str] | None = None, timeout: float = 30.0
) -> Runner:
    """A function that runs ``argv_prefix + args`` and returns stdout, or raises SourceUnavailable.
    ``argv_prefix`` names the fleet's own sacctmgr (a path, or a wrapper such as a chroot's); ``env``
    adds e.g. ``SLURM_CONF`` to this process's environment."""
    full_env = {**os.environ, **(env or {})}

    def run(args: Sequence[str]) -> str:
        argv = [*argv_prefix, *args]
        try:
            done = subprocess.run(argv, env=full_env, capture_output=True, text=True, timeout=timeout, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise SourceUnavailable(f"sacctmgr: {exc}", retryable=True) from exc
        if done.returncode != 0:
            message = (done.stderr or done.stdout).strip()
            raise SourceUnavailable(f"{' '.join(argv[len(argv_prefix) :])} -> {done.returncode}: {message}")
        return done.stdout

    return run


# ------------------------------------------------------------------------------------------- parsing


def parse_grp_tres(text: str) -> tuple[tuple[str, int], ...]:
    """``gres/gpu=8,cpu=64`` -> ``(("cpu", 64), ("gres/gpu", 8))``; empty -> ``()``."""
    pairs = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, _, count = part.partition("=")
        if not count.lstrip("-").isdigit():
            raise MalformedResponse(f"sacctmgr: unreadable GrpTRES entry {part!r}")
        if int(count) >= 0:
            pairs.append((name, int(count)))
    return tuple(sorted(pairs))


def _fairshare(text: Any) -> int:
    """Raw shares; ``parent`` (shares taken from the parent) reads as 0 shares of its own."""
    value = number(text)
    if value is None or str(value).lower() == "parent":
        return 0
    try:
        return int(value)
    except (TypeError, ValueError) as exc:
        raise MalformedResponse(f"slurm: unreadable Fairshare {value!r}") from exc


def parse_sacctmgr_associations(text: str) -> tuple[list[SlurmAccount], list[SlurmUser]]:
    """``sacctmgr -n -P show assoc format=account,user,parentname,fairshare,grptres`` -> accounts, users.
    An account row has no user; the ``root`` account has no parent and is not governed (skipped)."""
    accounts, users = [], []
    for line in filter(None, text.splitlines()):
        fields = line.split("|")
        if len(fields) < 5:
            raise MalformedResponse(f"sacctmgr: expected 5 fields, got {line!r}")
        account, user, parent, fairshare, grp_tres = fields[:5]
        if user:
            users.append(SlurmUser(user=user, account=account))
        elif parent:
            accounts.append(SlurmAccount(account, parent, _fairshare(fairshare), parse_grp_tres(grp_tres)))
    return accounts, users


def _tres_list(items: Any) -> tuple[tuple[str, int], ...]:
    """slurmdb TRES objects (``{"type": "gres", "name": "gpu", "count": 8}``) -> ``(("gres/gpu", 8),)``."""
    pairs = []
    for item in items or ():
        count = number(item.get("count"))
        if count is None or count < 0:
            continue
        name = f"{item['type']}/{item['name']}" if item.get("name") else str(item["type"])
        pairs.append((name, int(count)))
    return tuple(sorted(pairs))


def parse_slurmdb_associations(document: Any, cluster: str) -> tuple[list[SlurmAccount], list[SlurmUser]]:
    """slurmrestd ``/slurmdb/<version>/associations`` (v0.0.38 and v0.0.40+) -> accounts, users.
    GrpTRES is ``max.tres.total`` there; Fairshare is ``shares_raw``."""
    accounts, users = [], []
    for raw in _slurmdb_items(document, "associations"):
        if raw.get("cluster") not in (None, cluster):
            continue
        if raw.get("user"):
            users.append(SlurmUser(user=str(raw["user"]), account=str(raw["account"])))
        elif raw.get("parent_account"):
            grp = _tres_list(((raw.get("max") or {}).get("tres") or {}).get("total"))
            accounts.append(
                SlurmAccount(str(raw["account"]), str(raw["parent_account"]), _fairshare(raw.get("shares_raw")), grp)
            )
    return accounts, users


def _slurmdb_items(document: Any, key: str) -> list[dict[str, Any]]:
    if not isinstance(document, dict) or not isinstance(document.get(key), list):
        raise MalformedResponse(f"slurmdb: expected an object with a {key!r} list")
    # "Nothing found" (9003) is how slurmdbd answers an empty query, not a failure.
    errors = [e for e in document.get("errors") or () if e.get("error_number") != 9003]
    if errors:
        raise SourceUnavailable(f"slurmdb {key}: slurmrestd reported {errors}", retryable=True)
    return list(document[key])


@dataclass(frozen=True, slots=True)
class FinishedJob:
    """One finished job (or array task) from slurmdbd: who ran it, how many GPUs, from when to when."""

    job_id: str
    account: str
    user: str
    state: str
    gpus: int
    start: int
    end: int
    submitted: int = 0

    @property
    def gpu_seconds(self) -> int:
        return self.gpus * max(self.end - self.start, 0)


FINISHED_STATES = frozenset(
    {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "PREEMPTED", "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE"}
)


def _job_id(raw: Mapping[str, Any]) -> str:
    array = raw.get("array") or {}
    array_job, task = number(array.get("job_id")), number(array.get("task_id"))
    return f"{array_job}_{task}" if array_job and task is not None else str(raw["job_id"])


def parse_finished_jobs(document: Any) -> list[FinishedJob]:
    """slurmdb jobs / ``sacct --json`` (v0.0.38 and v0.0.40+) -> the jobs that ran and ended.
    GPUs are the allocated ``gres/gpu`` TRES; a job that never started (cancelled while pending) is
    left out: it used nothing."""
    jobs = []
    for raw in _slurmdb_items(document, "jobs"):
        state = job_state((raw.get("state") or {}).get("current")).upper()
        times = raw.get("time") or {}
        start, end = number(times.get("start")) or 0, number(times.get("end")) or 0
        if state not in FINISHED_STATES or not start or not end:
            continue
        gpus = dict(_tres_list((raw.get("tres") or {}).get("allocated"))).get(GPU_TRES, 0)
        account, user = str(raw.get("account") or ""), str(raw.get("user") or "")
        submitted = int(number(times.get("submission")) or start)
        jobs.append(FinishedJob(_job_id(raw), account, user, state, gpus, int(start), int(end), submitted))
    return jobs


def gpu_hours_by_account(jobs: Iterable[FinishedJob], start: int, end: int) -> dict[str, float]:
    """GPU-hours per account inside ``[start, end)``, each job clipped to the window, as
    ``sreport cluster AccountUtilizationByUser`` counts them."""
    hours: dict[str, float] = {}
    for job in jobs:
        overlap = min(job.end, end) - max(job.start, start)
        if overlap > 0 and job.gpus:
            hours[job.account] = hours.get(job.account, 0.0) + job.gpus * overlap / 3600
    return hours


# ------------------------------------------------------------------------------------------ readers


def read_associations_rest(
    client: JsonClient, api_version: str, cluster: str
) -> tuple[list[SlurmAccount], list[SlurmUser]]:
    if api_version not in SLURMDB_VERSIONS:
        raise ValueError(f"slurmrestd {api_version} has no slurmdb endpoints; use read_associations_sacctmgr")
    return parse_slurmdb_associations(client.get_json(f"/slurmdb/{api_version}/associations"), cluster)


def read_associations_sacctmgr(run: Runner, cluster: str) -> tuple[list[SlurmAccount], list[SlurmUser]]:
    return parse_sacctmgr_associations(
        run(["-n", "-P", "show", "assoc", f"cluster={cluster}", f"format={ASSOC_FORMAT}"])
    )


# slurmdb's ``start_time``/``end_time`` take epoch seconds from data parser v0.0.42 on. Slurm 24.11's v0.0.40 and
# v0.0.41 parsers refuse them with 422 ("Parsing of <epoch> for timestamp failed"), as v0.0.36-v0.0.38 do with
# "Unable to parse time format"; all of them take ``now-N``. Found on the project's real 24.11 fixture
# (tests/governance_live/test_slurmdb_times_live.py).
EPOCH_SLURMDB_VERSIONS = ("v0.0.42",)


def slurmdb_time(epoch: float, api_version: str, now: float) -> str:
    """A time for slurmdb's ``start_time``/``end_time``: epoch seconds where the parser takes them (v0.0.42+),
    else ``now-N`` / ``now+N`` relative to our clock (absolute strings are read in slurmrestd's own time zone,
    which we cannot know)."""
    if api_version in EPOCH_SLURMDB_VERSIONS:
        return str(int(epoch))
    delta = round(epoch - now)
    return f"now{delta:+d}" if delta else "now"


def read_finished_jobs_rest(
    client: JsonClient, api_version: str, start: float, end: float, *, now: float | None = None
) -> list[FinishedJob]:
    """Jobs that finished in ``[start, end]`` (epoch seconds) from ``/slurmdb/<version>/jobs``."""
    clock = time.time() if now is None else now
    params = {"start_time": slurmdb_time(start, api_version, clock), "end_time": slurmdb_time(end, api_version, clock)}
    return parse_finished_jobs(client.get_json(f"/slurmdb/{api_version}/jobs", params=params))


def read_finished_jobs_sacct(run: Runner, start: float, end: float) -> list[FinishedJob]:
    """The same from ``sacct --json`` (for slurmrestd versions without slurmdb endpoints). ``run`` must run
    sacct with ``TZ=UTC``: sacct reads ``-S``/``-E`` as local times."""
    window = [f"--starttime={_utc(start)}", f"--endtime={_utc(end)}"]
    return parse_finished_jobs(_json_document(run(["--json", "--allusers", "--allocations", *window])))


def _utc(epoch: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(epoch))


def _json_document(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError as exc:
        raise MalformedResponse(f"sacct --json: not JSON ({exc})") from exc


# ------------------------------------------------------------------------------------------- writer


def _grp_tres_arg(account: SlurmAccount, current: SlurmAccount | None) -> str:
    """``GrpTRES=`` value: the desired caps, plus ``-1`` for each cap the account has now and should not."""
    wanted = dict(account.grp_tres)
    cleared = [name for name, _ in (current.grp_tres if current else ()) if name not in wanted]
    parts = [f"{name}={count}" for name, count in sorted(wanted.items())] + [f"{n}={UNLIMITED}" for n in cleared]
    return ",".join(parts)


def add_account_argv(account: SlurmAccount, cluster: str) -> list[str]:
    argv = ["-i", "add", "account", account.name, f"cluster={cluster}", f"parent={account.parent}"]
    argv.append(f"fairshare={account.fairshare}")
    if account.grp_tres:
        argv.append(f"grptres={_grp_tres_arg(account, None)}")
    return argv


def modify_account_argv(account: SlurmAccount, current: SlurmAccount, cluster: str) -> list[str]:
    """Only the settings that differ; ``[]`` when none do (nothing to run)."""
    sets = []
    if account.parent != current.parent:
        sets.append(f"parent={account.parent}")
    if account.fairshare != current.fairshare:
        sets.append(f"fairshare={account.fairshare}")
    if account.grp_tres != current.grp_tres:
        sets.append(f"grptres={_grp_tres_arg(account, current)}")
    if not sets:
        return []
    return ["-i", "modify", "account", "where", f"name={account.name}", f"cluster={cluster}", "set", *sets]


class SlurmAccountingWriter:
    """Idempotent writes of accounts and user associations through ``sacctmgr -i``."""

    def __init__(self, run: Runner, cluster: str) -> None:
        self.run = run
        self.cluster = cluster

    def read(self) -> tuple[list[SlurmAccount], list[SlurmUser]]:
        return read_associations_sacctmgr(self.run, self.cluster)

    def _account(self, name: str) -> SlurmAccount | None:
        accounts, _ = parse_sacctmgr_associations(
            self.run(
                ["-n", "-P", "show", "assoc", f"cluster={self.cluster}", f"account={name}", f"format={ASSOC_FORMAT}"]
            )
        )
        return next((a for a in accounts if a.name == name), None)

    def ensure_account(self, account: SlurmAccount) -> bool:
        """Make ``account`` exist with exactly these settings; True when something was written."""
        current = self._account(account.name)
        argv = (
            add_account_argv(account, self.cluster)
            if current is None
            else modify_account_argv(account, current, self.cluster)
        )
        if argv:
            self.run(argv)
        return bool(argv)

    def remove_account(self, name: str) -> bool:
        if self._account(name) is None:
            return False
        self.run(["-i", "delete", "account", "where", f"name={name}", f"cluster={self.cluster}"])
        return True

    def _has_user(self, user: SlurmUser) -> bool:
        out = self.run(
            [
                "-n",
                "-P",
                "show",
                "assoc",
                f"cluster={self.cluster}",
                f"account={user.account}",
                f"user={user.user}",
                "format=account,user",
            ]
        )
        return any(line.split("|")[:2] == [user.account, user.user] for line in out.splitlines())

    def ensure_user(self, user: SlurmUser) -> bool:
        if self._has_user(user):
            return False
        self.run(["-i", "add", "user", user.user, f"account={user.account}", f"cluster={self.cluster}"])
        return True

    def remove_user(self, user: SlurmUser) -> bool:
        if not self._has_user(user):
            return False
        self.run(
            ["-i", "delete", "user", "where", f"name={user.user}", f"account={user.account}", f"cluster={self.cluster}"]
        )
        return True
