"""A Slurm site's own history and layout, for ``manage.py import_slurm``.

* ``read_sacct``: ``sacct -P`` output (``|``-separated, header line; e.g. ``sacct -a -P -X -o
  JobID,Submit,Start,End,Timelimit,AllocTRES,NNodes,Account,State``) to jobs. Job steps (``123.batch``)
  are left out; jobs that never started are skipped and counted. ``Timelimit`` becomes the generic CSV's
  ``time_limit`` (what backfill reserves by); ``UNLIMITED``/``Partition_Limit`` leave it empty.
  GPUs come from ``AllocTRES`` (``gres/gpu=N`` or ``gres/gpu:type=N``) split evenly over ``NNodes``
  members; team = ``Account`` (else ``User``); every job is ``slurm``/``training``.
* ``sacct --json`` output is read the same way (``time.submission/start/end`` epochs, ``time.limit`` in
  minutes, plain or ``{"set", "infinite", "number"}``; ``tres.allocated`` ``gres``/``gpu``, ``cpu``,
  ``mem``; ``allocation_nodes``); its errors name the line of the job's ``job_id`` and the key.
* ``read_slurm_conf``: ``NodeName`` lines (``DEFAULT`` values, hostlists, ``Gres=gpu[:type]:N``,
  ``CPUs``, ``RealMemory``, ``Feature``) to fleet nodes and ``PartitionName`` lines to partitions.

Every malformed row names file, line and column (or key).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from functools import partial
from pathlib import Path

from scheduling.collectors.hostlist import expand_hostlist
from scheduling.engine.types import Node, Request, TopologyLevel, WorkloadKind
from scheduling.traces.csvrows import Row
from scheduling.traces.errors import OnError, ReportBuilder, TraceFormatError
from scheduling.traces.records import Trace, TraceJob

SACCT_COLUMNS = ("JobID", "Submit", "Start", "End", "Timelimit", "AllocTRES", "NNodes")
NEVER_STARTED = frozenset({"", "unknown", "none", "n/a"})
_GPU_TRES = re.compile(r"(?:^|,)gres/gpu(?::[^=,]+)?=(\d+)")
_CPU_TRES = re.compile(r"(?:^|,)cpu=(\d+)")
_MEM_TRES = re.compile(r"(?:^|,)mem=([\d.]+)([KMGT]?)")
_MEM_MIB = {"K": 1 / 1024, "": 1.0, "M": 1.0, "G": 1024.0, "T": 1024.0 * 1024}


def parse_time_limit(text: str) -> float | None:
    """Slurm's time formats to seconds: ``minutes``, ``minutes:seconds``, ``hours:minutes:seconds``,
    ``days-hours``, ``days-hours:minutes``, ``days-hours:minutes:seconds``; ``None`` for no limit."""
    text = text.strip()
    if text.upper() in ("UNLIMITED", "PARTITION_LIMIT", "INFINITE", ""):
        return None
    days = 0
    if "-" in text:
        head, text = text.split("-", 1)
        days = int(head)
        parts = [int(p) for p in text.split(":")]
        hours, minutes, seconds = [*parts, 0, 0][:3]
    else:
        parts = [int(p) for p in text.split(":")]
        if len(parts) == 1:
            hours, minutes, seconds = 0, parts[0], 0
        elif len(parts) == 2:
            hours, minutes, seconds = 0, parts[0], parts[1]
        elif len(parts) == 3:
            hours, minutes, seconds = parts
        else:
            raise ValueError(text)
    return float(((days * 24 + hours) * 60 + minutes) * 60 + seconds)


def read_sacct(path: str | Path, *, on_error: OnError = "raise") -> Trace:
    """``sacct -P`` or ``sacct --json`` output (recognised from the first character) as a trace."""
    report = ReportBuilder(path, on_error)
    text = Path(path).read_text(encoding="utf-8")
    parsed = _sacct_json(path, text, report) if text.lstrip().startswith("{") else _sacct_pipes(path, text, report)
    origin = min((submitted for submitted, _ in parsed), default=None)
    jobs = []
    for submitted, job in sorted(parsed, key=lambda pair: pair[0]):
        offset = (submitted - origin).total_seconds() if origin else 0.0
        request = replace(job.request, submitted_at=offset)
        jobs.append(TraceJob(request=request, submit_s=offset, duration_s=job.duration_s))
    return Trace(name=Path(path).stem, jobs=tuple(jobs), reports=(report.build(),))


def _sacct_pipes(path: str | Path, text: str, report: ReportBuilder) -> list[tuple[datetime, TraceJob]]:
    name = str(path)
    parsed: list[tuple[datetime, TraceJob]] = []
    lines = text.splitlines()
    if not lines:
        raise TraceFormatError(path, 1, SACCT_COLUMNS[0], "empty file")
    columns = tuple(c.strip() for c in lines[0].split("|"))
    for column in SACCT_COLUMNS:
        if column not in columns:
            raise TraceFormatError(path, 1, column, f"missing column (header has {', '.join(columns)}); run sacct -P")
    for number, line in enumerate(lines[1:], start=2):
        if not line.strip():
            continue
        fields = line.split("|")
        if len(fields) < len(columns):
            fields += [""] * (len(columns) - len(fields))  # sacct -P drops trailing empty fields
        row = Row(name, number, dict(zip(columns, fields[: len(columns)], strict=True)))
        if "." in row.text("JobID"):
            continue  # a job step: its job is the row that counts
        _keep(report, parsed, partial(_sacct_job, row), f"{name}:{number}: job {row.text('JobID')}")
    return parsed


def _sacct_json(path: str | Path, text: str, report: ReportBuilder) -> list[tuple[datetime, TraceJob]]:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise TraceFormatError(path, error.lineno, "", f"not valid JSON: {error.msg}") from None
    if not isinstance(data, dict) or not isinstance(data.get("jobs"), list):
        raise TraceFormatError(path, 1, "jobs", "expected sacct --json output: an object with a 'jobs' list")
    parsed: list[tuple[datetime, TraceJob]] = []
    for index, job in enumerate(data["jobs"]):
        job_id = job.get("job_id") if isinstance(job, dict) else None
        line = _line_of(text, job_id)
        _keep(report, parsed, partial(_json_job, path, line, index, job), f"{path}:{line}: job {job_id}")
    return parsed


def _keep(
    report: ReportBuilder,
    parsed: list[tuple[datetime, TraceJob]],
    parse: Callable[[], tuple[datetime, TraceJob] | None],
    where: str,
) -> None:
    """Count one job row: kept, malformed (raised or skipped per ``report``) or never started (skipped)."""
    report.row()
    try:
        item = parse()
    except TraceFormatError as error:
        report.malformed(error)
        return
    if item is None:
        report.skip("never started", f"{where} never started")
        return
    parsed.append(item)
    report.kept()


def _line_of(text: str, job_id: object) -> int:
    match = re.search(rf'"job_id"\s*:\s*{re.escape(str(job_id))}\b', text) if job_id is not None else None
    return text.count("\n", 0, match.start()) + 1 if match else 1


def sacct_number(value: object) -> float | None:
    """A plain number, or Slurm 23+'s ``{"set": .., "infinite": .., "number": ..}``; None if unset/infinite."""
    if isinstance(value, dict):
        if not value.get("set", True) or value.get("infinite", False):
            return None
        value = value.get("number")
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _json_job(path: str | Path, line: int, index: int, job: object) -> tuple[datetime, TraceJob] | None:
    def fail(key: str, message: str) -> TraceFormatError:
        return TraceFormatError(path, line, f"jobs[{index}].{key}", message)

    if not isinstance(job, dict):
        raise fail("", "a job object is required")
    times = job.get("time") if isinstance(job.get("time"), dict) else {}
    submit, start, end = (sacct_number(times.get(key)) for key in ("submission", "start", "end"))
    if submit is None:
        raise fail("time.submission", "an epoch in seconds is required")
    if not start or not end:
        return None
    if end < start:
        raise fail("time.end", "ends before it starts")
    limit = sacct_number(times.get("limit"))
    members = int(sacct_number(job.get("allocation_nodes")) or 1)
    tres = job.get("tres", {}).get("allocated", []) if isinstance(job.get("tres"), dict) else []
    counts = {"gpu": 0.0, "cpu": 0.0, "mem": 0.0}
    for entry in tres if isinstance(tres, list) else []:
        kind, label = str(entry.get("type", "")), str(entry.get("name", ""))
        key = "gpu" if kind == "gres" and label.split(":")[0] == "gpu" else kind
        if key in counts:
            counts[key] += sacct_number(entry.get("count")) or 0.0
    gpus = int(counts["gpu"])
    if gpus % members:
        raise fail("tres.allocated", f"{gpus} GPUs do not split evenly over {members} nodes")
    duration = end - start
    request = Request(
        id=str(job.get("job_id", index)),
        members=members,
        gpus_per_member=gpus // members,
        cpu_milli=int(counts["cpu"]) * 1000 // members,
        memory_mib=int(counts["mem"]) // members,
        topology=TopologyLevel.LEAF_SWITCH if members > 1 else TopologyLevel.ANY,
        team=str(job.get("account") or job.get("user") or "unknown"),
        kind=WorkloadKind.TRAINING,
        duration_estimate_s=max(limit * 60, duration) if limit is not None else duration,
        orchestrator="slurm",
    )
    return datetime.fromtimestamp(submit, tz=UTC), TraceJob(request=request, submit_s=0.0, duration_s=duration)


def _sacct_job(row: Row) -> tuple[datetime, TraceJob] | None:
    if row.text("Start").lower() in NEVER_STARTED or row.text("End").lower() in NEVER_STARTED:
        return None
    submit, start, end = row.timestamp("Submit"), row.timestamp("Start"), row.timestamp("End")
    if end < start:
        raise row.error("End", f"ends before it starts ({start})")
    duration = (end - start).total_seconds()
    try:
        limit = parse_time_limit(row.text("Timelimit"))
    except ValueError:
        raise row.error("Timelimit", f"not a Slurm time limit: {row.text('Timelimit')!r}") from None
    members = row.integer("NNodes", minimum=1)
    tres = row.text("AllocTRES")
    gpus = sum(int(m) for m in _GPU_TRES.findall(tres))
    if gpus % members:
        raise row.error("AllocTRES", f"{gpus} GPUs do not split evenly over {members} nodes")
    cpu = _CPU_TRES.search(tres)
    memory = _MEM_TRES.search(tres)
    team = (row.text("Account") if row.has("Account") else "") or (row.text("User") if row.has("User") else "")
    request = Request(
        id=row.text("JobID", allow_empty=False),
        members=members,
        gpus_per_member=gpus // members,
        cpu_milli=int(cpu.group(1)) * 1000 // members if cpu else 0,
        memory_mib=int(float(memory.group(1)) * _MEM_MIB[memory.group(2)]) // members if memory else 0,
        topology=TopologyLevel.LEAF_SWITCH if members > 1 else TopologyLevel.ANY,
        team=team or "unknown",
        kind=WorkloadKind.TRAINING,
        duration_estimate_s=max(limit, duration) if limit is not None else duration,
        orchestrator="slurm",
    )
    return submit, TraceJob(request=request, submit_s=0.0, duration_s=duration)


# -- slurm.conf ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Partition:
    name: str
    nodes: tuple[str, ...]
    line: int
    default: bool
    accounts: tuple[str, ...] = ()  # AllowAccounts (empty: ALL or not set)
    exclusive: bool = False  # OverSubscribe=EXCLUSIVE: each job holds whole nodes


@dataclass(frozen=True)
class SlurmConf:
    nodes: tuple[Node, ...]
    partitions: tuple[Partition, ...]
    settings: dict[str, str]  # the other Key=Value lines (SchedulerType, PriorityType, ...)

    @property
    def backfill(self) -> str:
        return "easy" if self.settings.get("SchedulerType", "sched/backfill") == "sched/backfill" else "none"

    @property
    def backfill_depth(self) -> int:
        match = re.search(r"bf_max_job_test=(\d+)", self.settings.get("SchedulerParameters", ""))
        return int(match.group(1)) if match else 500  # Slurm's default bf_max_job_test

    @property
    def queue(self) -> str:
        """Fair share only when multifactor priority weighs it: Slurm's PriorityWeightFairshare defaults to 0,
        and with it 0 the multifactor order is by age (and other weights), i.e. arrival order here."""
        if self.settings.get("PriorityType") != "priority/multifactor":
            return "fifo"
        weight = self.settings.get("PriorityWeightFairshare", "0")
        return "fairshare" if weight.isdigit() and int(weight) > 0 else "fifo"


def read_slurm_conf(path: str | Path) -> SlurmConf:
    """Nodes, partitions and scheduler settings of a ``slurm.conf`` (``Include`` files are not followed)."""
    settings: dict[str, str] = {}
    defaults: dict[str, str] = {}
    nodes: dict[str, Node] = {}
    partitions: list[Partition] = []
    text = Path(path).read_text(encoding="utf-8")
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        pairs = _pairs(line)
        key = next(iter(pairs), "").lower()
        if key == "nodename":
            if pairs["NodeName"].upper() == "DEFAULT":
                defaults.update({k: v for k, v in pairs.items() if k != "NodeName"})
                continue
            values = {**defaults, **pairs}
            for name in expand_hostlist(pairs["NodeName"]):
                if name in nodes:
                    raise TraceFormatError(path, number, "NodeName", f"node {name} defined twice")
                nodes[name] = _conf_node(path, number, name, values)
        elif key not in ("nodename", "partitionname") and len(pairs) == 1:
            settings.update(pairs)
        elif key == "partitionname" and pairs["PartitionName"].upper() != "DEFAULT":
            members = pairs.get("Nodes", "")
            names = tuple(nodes) if members.upper() == "ALL" else tuple(expand_hostlist(members))
            unknown = [n for n in names if n not in nodes]
            if unknown:
                undefined = "undefined node" if len(unknown) == 1 else "undefined nodes"
                raise TraceFormatError(path, number, "Nodes", f"{undefined}: {', '.join(unknown[:5])}")
            partitions.append(_partition(pairs, names, number))
    if not nodes:
        raise TraceFormatError(path, 1, "NodeName", "no NodeName lines")
    return SlurmConf(tuple(nodes.values()), tuple(partitions), settings)


def _partition(pairs: dict[str, str], names: tuple[str, ...], number: int) -> Partition:
    accounts = pairs.get("AllowAccounts", "")
    return Partition(
        pairs["PartitionName"],
        names,
        number,
        default=pairs.get("Default", "NO").upper() == "YES",
        accounts=() if accounts.upper() in ("", "ALL") else tuple(a for a in accounts.split(",") if a),
        exclusive=pairs.get("OverSubscribe", "NO").upper().startswith("EXCLUSIVE"),
    )


def _pairs(line: str) -> dict[str, str]:
    pairs: dict[str, str] = {}
    for token in line.split():
        key, _, value = token.partition("=")
        pairs[key] = value
    return pairs


def _conf_node(path: str | Path, number: int, name: str, values: dict[str, str]) -> Node:
    gpus, model = 0, ""
    for gres in values.get("Gres", "").split(","):
        parts = gres.split(":")
        if parts[0] != "gpu" or len(parts) < 2:
            continue
        count = parts[-1].split("(")[0]
        if not count.isdigit():
            raise TraceFormatError(path, number, "Gres", f"GPU count {count!r} is not a number")
        gpus += int(count)
        model = model or (parts[1] if len(parts) == 3 else "")
    try:
        cpus = int(values.get("CPUs", "0") or 0)
        memory = int(values.get("RealMemory", "0") or 0)
    except ValueError as error:
        raise TraceFormatError(path, number, "CPUs/RealMemory", str(error)) from None
    return Node(
        name=name,
        gpu_total=gpus,
        gpu_model=model,
        cpu_milli_total=cpus * 1000,
        cpu_milli_free=cpus * 1000,
        memory_mib_total=memory,
        memory_mib_free=memory,
        nvlink_domain=name,
    )
