"""Microsoft Philly (ATC'19), job level, as processed by Pollux (``philly.csv``).

Columns: ``timestamp`` (local date-time of submission), ``duration`` (run seconds), ``num_gpus``,
``gpu_time`` (= duration x num_gpus), ``cluster`` (virtual-cluster hash). Each row is a rigid gang job.
The data is CC BY 4.0 (Microsoft Research); the project's test slice carries an ATTRIBUTION file.

Mapping to the engine: the VC becomes the team; jobs of more than ``gpus_per_node`` GPUs become
multi-node gangs of equal members (see :func:`gang_shape`). Submission times are seconds after the
earliest time stamp in the file; the time stamps are naive local times and are compared as such.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import NamedTuple

from scheduling.engine.types import Request, TopologyLevel, WorkloadKind
from scheduling.traces.csvrows import CsvFile
from scheduling.traces.errors import OnError, ReportBuilder, TraceFormatError
from scheduling.traces.records import Trace, TraceJob

PHILLY_COLUMNS = ("timestamp", "duration", "num_gpus", "cluster")
# The Philly README's example server has 8 GPUs; the machine list itself is not public.
PHILLY_GPUS_PER_NODE = 8


def gang_shape(gpus: int, gpus_per_node: int = PHILLY_GPUS_PER_NODE) -> tuple[int, int]:
    """``(members, gpus_per_member)`` for a rigid job of ``gpus`` GPUs on ``gpus_per_node``-GPU nodes.

    One member when it fits a node; otherwise the fewest equal members that each fit a node
    (12 -> 2 x 6, 24 -> 3 x 8). A prime count larger than a node falls back to one GPU per member.
    """
    if gpus <= gpus_per_node:
        return 1, gpus
    members = -(-gpus // gpus_per_node)
    while gpus % members:
        members += 1
    return members, gpus // members


def read_philly(
    path: str | Path,
    *,
    on_error: OnError = "raise",
    gpus_per_node: int = PHILLY_GPUS_PER_NODE,
    name: str | None = None,
) -> Trace:
    """All jobs of a Philly job list, sorted by submission time."""
    report = ReportBuilder(path, on_error)
    parsed: list[_PhillyRow] = []
    for row in CsvFile(path, PHILLY_COLUMNS):
        report.row()
        try:
            fields = _PhillyRow(
                line=row.line,
                stamp=row.timestamp("timestamp"),
                gpus=row.integer("num_gpus", minimum=0),
                duration=row.number("duration", minimum=0),
                team=row.text("cluster", allow_empty=False),
            )
        except TraceFormatError as error:
            report.malformed(error)
            continue
        if fields.gpus == 0:
            report.skip("no GPUs requested", f"{path}:{row.line}: num_gpus is 0")
            continue
        parsed.append(fields)
        report.kept()
    epoch = min((fields.stamp for fields in parsed), default=datetime(1970, 1, 1))
    stem = Path(path).stem
    jobs = [_job(stem, fields, (fields.stamp - epoch).total_seconds(), gpus_per_node) for fields in parsed]
    jobs.sort(key=lambda job: job.submit_s)
    return Trace(
        name=name or stem,
        jobs=tuple(jobs),
        reports=(report.build(),),
        notes={"epoch": epoch.isoformat(sep=" "), "license": "Philly traces: CC BY 4.0, Microsoft Research"},
    )


class _PhillyRow(NamedTuple):
    line: int
    stamp: datetime
    gpus: int
    duration: float
    team: str


def _job(stem: str, fields: _PhillyRow, submit_s: float, gpus_per_node: int) -> TraceJob:
    members, per_member = gang_shape(fields.gpus, gpus_per_node)
    request = Request(
        id=f"{stem}-{fields.line}",
        members=members,
        gpus_per_member=per_member,
        # Multi-node gangs prefer one leaf switch (all-reduce traffic) but may spread when they must.
        topology=TopologyLevel.LEAF_SWITCH if members > 1 else TopologyLevel.ANY,
        team=fields.team,
        kind=WorkloadKind.TRAINING,
        duration_estimate_s=fields.duration,
        submitted_at=submit_s,
    )
    return TraceJob(request=request, submit_s=submit_s, duration_s=fields.duration)
