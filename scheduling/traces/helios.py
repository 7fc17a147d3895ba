"""SenseTime Helios (SC'21): daily GPUs per VC and per-minute occupancy of one VC; Philly VC sizes.

There is no Helios job log in the public data, so these readers return capacity and occupancy series,
not jobs: the measured baseline of a siloed Slurm cluster (one partition per VC) that simulated runs
are compared against.

* ``cluster_gpu_number.csv`` / ``Earth_gpu_number.csv``: ``date``, one column per VC, ``total``.
* ``<vc>/cluster_sequence_vc.csv``: one row per minute; we keep ``time``, ``total_gpu_num`` (capacity),
  ``running_gpu_num`` (allocated), ``pending_gpu_num`` (requested by queued jobs).
* ``philly_vc.csv``: ``vc``, ``node num``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime
from pathlib import Path

from scheduling.traces.csvrows import CsvFile
from scheduling.traces.errors import OnError, ReadReport, ReportBuilder, TraceFormatError


@dataclass(frozen=True, slots=True)
class VcCapacityDay:
    """GPUs each VC owned on one day; ``total`` as printed in the file (checked against the sum)."""

    day: date
    gpus: dict[str, int]
    total: int


@dataclass(frozen=True, slots=True)
class VcMinute:
    """One minute of one VC: ``time_s`` counts seconds from the first row of the file."""

    time_s: float
    capacity_gpus: int
    running_gpus: int
    pending_gpus: int


def read_helios_vc_sizes(
    path: str | Path, *, on_error: OnError = "raise"
) -> tuple[tuple[VcCapacityDay, ...], ReadReport]:
    report = ReportBuilder(path, on_error)
    rows = CsvFile(path, ("date", "total"))
    days: list[VcCapacityDay] = []
    for row in rows:
        report.row()
        try:
            vcs = [column for column in rows.columns if column not in ("date", "total")]
            gpus = {vc: row.integer(vc, minimum=0) for vc in vcs}
            total = row.integer("total", minimum=0)
            if total != sum(gpus.values()):
                raise row.error(
                    "total", f"{total} differs from the sum of the VC columns ({sum(gpus.values())})"
                )
            day = row.timestamp("date").date()
        except TraceFormatError as error:
            report.malformed(error)
            continue
        days.append(VcCapacityDay(day=day, gpus=gpus, total=total))
        report.kept()
    return tuple(days), report.build()


def read_helios_vc_occupancy(
    path: str | Path, *, on_error: OnError = "raise"
) -> tuple[tuple[VcMinute, ...], ReadReport]:
    report = ReportBuilder(path, on_error)
    minutes: list[VcMinute] = []
    start: datetime | None = None
    for row in CsvFile(path, ("time", "total_gpu_num", "running_gpu_num", "pending_gpu_num")):
        report.row()
        try:
            stamp = row.timestamp("time")
            minute = VcMinute(
                time_s=0.0,
                capacity_gpus=row.integer("total_gpu_num", minimum=0),
                running_gpus=row.integer("running_gpu_num", minimum=0),
                pending_gpus=row.integer("pending_gpu_num", minimum=0),
            )
        except TraceFormatError as error:
            report.malformed(error)
            continue
        start = start or stamp
        minutes.append(
            VcMinute(
                time_s=(stamp - start).total_seconds(),
                capacity_gpus=minute.capacity_gpus,
                running_gpus=minute.running_gpus,
                pending_gpus=minute.pending_gpus,
            )
        )
        report.kept()
    return tuple(minutes), report.build()


def read_philly_vc_nodes(
    path: str | Path, *, on_error: OnError = "raise"
) -> tuple[dict[str, int], ReadReport]:
    """Nodes per Philly VC from HeliosArtifact's ``philly_vc.csv`` (11 VCs; GPUs per node unknown)."""
    report = ReportBuilder(path, on_error)
    nodes: dict[str, int] = {}
    for row in CsvFile(path, ("vc", "node num")):
        report.row()
        try:
            nodes[row.text("vc", allow_empty=False)] = row.integer("node num", minimum=0)
        except TraceFormatError as error:
            report.malformed(error)
            continue
        report.kept()
    return nodes, report.build()
