"""gpuportal's own job-history CSV, so users can replay their own cluster's history.

One row per job; header required; column order free; documented in ``docs/simulator.md``.

Required columns:
  ``submit_time``      seconds (>= 0) from any epoch you choose
  ``duration``         run time in seconds (>= 0)
  ``gang_size``        members of the gang (>= 1), all placed at once or not at all
  ``gpus_per_member``  whole GPUs per member (0 = CPU-only), or a fraction in (0, 1) for a shared GPU
  ``gpu_model``        required GPU model; empty = any; ``A|B`` = either
  ``team``             team (tenant, VC, account) the job is charged to
  ``kind``             training | hpo | inference | batch
Optional columns: ``id`` (default ``<file>-<line>``), ``priority`` (int, default 0), ``orchestrator``
(slurm | kubernetes | ray, empty = let the router choose), ``cpu_milli``, ``memory_mib``, ``time_limit``
(seconds > 0, at least ``duration``; what backfill reserves by, as Slurm does; empty = the duration).
Other columns are ignored and listed in the read report.
"""

from __future__ import annotations

import csv
from collections.abc import Iterable
from pathlib import Path

from scheduling.engine.types import MILLI_PER_GPU, OrchestratorKind, Request, TopologyLevel, WorkloadKind
from scheduling.traces.csvrows import CsvFile, Row, read_unique
from scheduling.traces.errors import OnError, ReportBuilder
from scheduling.traces.records import Trace, TraceJob

REQUIRED_COLUMNS = ("submit_time", "duration", "gang_size", "gpus_per_member", "gpu_model", "team", "kind")
OPTIONAL_COLUMNS = ("id", "priority", "orchestrator", "cpu_milli", "memory_mib", "time_limit")
KINDS = {kind.value: kind for kind in WorkloadKind}
ORCHESTRATORS = {kind.value for kind in OrchestratorKind}


def read_generic_csv(path: str | Path, *, on_error: OnError = "raise", name: str | None = None) -> Trace:
    report = ReportBuilder(path, on_error)
    rows = CsvFile(path, REQUIRED_COLUMNS)
    stem = Path(path).stem
    jobs = read_unique(rows, report, lambda row: _job(stem, row), lambda job: job.id, column="id", what="id")
    report.ignored_columns = tuple(c for c in rows.columns if c not in REQUIRED_COLUMNS + OPTIONAL_COLUMNS)
    jobs.sort(key=lambda job: job.submit_s)
    return Trace(name=name or stem, jobs=tuple(jobs), reports=(report.build(),))


def _job(stem: str, row: Row) -> TraceJob:
    submit = row.number("submit_time", minimum=0)
    duration = row.number("duration", minimum=0)
    members = row.integer("gang_size", minimum=1)
    whole, milli = _gpus_per_member(row)
    request = Request(
        id=row.text("id") or f"{stem}-{row.line}",
        members=members,
        gpus_per_member=whole,
        gpu_milli=milli,
        gpu_models=frozenset(m.strip() for m in row.text("gpu_model").split("|") if m.strip()),
        cpu_milli=row.integer("cpu_milli", minimum=0) if row.text("cpu_milli") else 0,
        memory_mib=row.integer("memory_mib", minimum=0) if row.text("memory_mib") else 0,
        topology=TopologyLevel.LEAF_SWITCH if members > 1 else TopologyLevel.ANY,
        team=row.text("team"),
        priority=row.integer("priority") if row.text("priority") else 0,
        kind=_kind(row),
        duration_estimate_s=_time_limit(row, duration),
        submitted_at=submit,
        orchestrator=_orchestrator(row),
    )
    return TraceJob(request=request, submit_s=submit, duration_s=duration)


def _gpus_per_member(row: Row) -> tuple[int, int]:
    """``(whole GPUs, milli-GPU share)``: exactly one of them is non-zero unless the job is CPU-only."""
    value = row.number("gpus_per_member", minimum=0)
    if value.is_integer():
        return int(value), 0
    if value < 1:
        return 0, max(1, round(value * MILLI_PER_GPU))
    raise row.error("gpus_per_member", f"{value} is neither a whole number of GPUs nor a share below 1")


def _time_limit(row: Row, duration: float) -> float:
    """What a scheduler knows in advance: the job's time limit, else (the perfect-estimate baseline) its duration."""
    if not row.text("time_limit"):
        return duration
    limit = row.number("time_limit")
    if limit <= 0:
        raise row.error("time_limit", f"a time limit must be > 0 seconds, got {limit:g}")
    if limit < duration:
        raise row.error("time_limit", f"{limit:g} s is shorter than the duration {duration:g} s (the job ran longer)")
    return limit


def _kind(row: Row) -> WorkloadKind:
    value = row.text("kind", allow_empty=False).lower()
    if value not in KINDS:
        raise row.error("kind", f"{value!r} is not one of {', '.join(KINDS)}")
    return KINDS[value]


def _orchestrator(row: Row) -> str:
    value = row.text("orchestrator").lower()
    if value and value not in ORCHESTRATORS:
        raise row.error("orchestrator", f"{value!r} is not one of {', '.join(sorted(ORCHESTRATORS))}")
    return value


def write_generic_csv(path: str | Path, jobs: Iterable[TraceJob]) -> int:
    """Write jobs in the generic format (e.g. to convert another trace); returns the rows written."""
    count = 0
    with Path(path).open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(("id", *REQUIRED_COLUMNS, *OPTIONAL_COLUMNS[1:]))
        for job in jobs:
            request = job.request
            per_member = request.gpu_milli / MILLI_PER_GPU if request.gpu_milli else request.gpus_per_member
            writer.writerow(
                (
                    request.id,
                    job.submit_s,
                    job.duration_s if job.duration_s is not None else 0,
                    request.members,
                    per_member,
                    "|".join(sorted(request.gpu_models)),
                    request.team,
                    request.kind.value,
                    request.priority,
                    request.orchestrator,
                    request.cpu_milli,
                    request.memory_mib,
                    "" if request.duration_estimate_s == job.duration_s else request.duration_estimate_s,
                )
            )
            count += 1
    return count
