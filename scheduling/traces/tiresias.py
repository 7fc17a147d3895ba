"""Tiresias (NSDI'19) simulator samples: a job list, cluster shapes with switches, GPU-time samples.

* jobs (``60_job.csv``): ``job_id,num_gpu,submit_time,iterations,model_name,duration,interval``;
  ``tf_job.csv`` has ``start_time`` and other extra columns, which are ignored (and reported).
* clusters (``cluster_spec.csv``, ``n32g4.csv``, ...): one row
  ``num_switch,num_node_p_switch,num_gpu_p_node,num_cpu_p_node,mem_p_node`` (memory in GB).
* ``yarn-gput*.csv``: one column ``duration`` of GPU-seconds per job.
"""

from __future__ import annotations

from pathlib import Path

from scheduling.engine.types import Node, Request, TopologyLevel, WorkloadKind
from scheduling.traces.csvrows import CsvFile, Row
from scheduling.traces.errors import OnError, ReadReport, ReportBuilder, TraceFormatError
from scheduling.traces.philly import gang_shape
from scheduling.traces.records import Trace, TraceJob

JOB_COLUMNS = ("job_id", "num_gpu", "submit_time", "duration")
CLUSTER_COLUMNS = ("num_switch", "num_node_p_switch", "num_gpu_p_node", "num_cpu_p_node", "mem_p_node")
MIB_PER_GB = 1024


def read_tiresias_jobs(
    path: str | Path, *, on_error: OnError = "raise", gpus_per_node: int = 8, name: str | None = None
) -> Trace:
    report = ReportBuilder(path, on_error)
    rows = CsvFile(path, JOB_COLUMNS)
    jobs: list[TraceJob] = []
    for row in rows:
        report.row()
        try:
            jobs.append(_job(row, gpus_per_node))
        except TraceFormatError as error:
            report.malformed(error)
            continue
        report.kept()
    known = {*JOB_COLUMNS, "iterations", "model_name", "interval"}
    report.ignored_columns = tuple(column for column in rows.columns if column not in known)
    jobs.sort(key=lambda job: job.submit_s)
    return Trace(name=name or Path(path).stem, jobs=tuple(jobs), reports=(report.build(),))


def _job(row: Row, gpus_per_node: int) -> TraceJob:
    gpus = row.integer("num_gpu", minimum=1)
    members, per_member = gang_shape(gpus, gpus_per_node)
    submit = row.number("submit_time", minimum=0)
    duration = row.number("duration", minimum=0)
    model = row.text("model_name") if row.has("model_name") else ""
    request = Request(
        id=f"tiresias-{row.text('job_id', allow_empty=False)}-{row.line}",
        members=members,
        gpus_per_member=per_member,
        topology=TopologyLevel.LEAF_SWITCH if members > 1 else TopologyLevel.ANY,
        team=model,
        kind=WorkloadKind.TRAINING,
        duration_estimate_s=duration,
        submitted_at=submit,
    )
    return TraceJob(request=request, submit_s=submit, duration_s=duration)


def read_tiresias_cluster(path: str | Path, *, prefix: str = "node") -> tuple[Node, ...]:
    """Nodes of a Tiresias cluster shape, with one leaf switch per ``num_switch`` under one spine."""
    for row in CsvFile(path, CLUSTER_COLUMNS):
        switches = row.integer("num_switch", minimum=1)
        per_switch = row.integer("num_node_p_switch", minimum=1)
        gpus = row.integer("num_gpu_p_node", minimum=0)
        cpu = row.integer("num_cpu_p_node", minimum=0) * 1000
        memory = row.integer("mem_p_node", minimum=0) * MIB_PER_GB
        return tuple(
            Node(
                name=f"{prefix}-s{switch:02d}-n{index:03d}",
                gpu_total=gpus,
                cpu_milli_total=cpu,
                cpu_milli_free=cpu,
                memory_mib_total=memory,
                memory_mib_free=memory,
                nvlink_domain=f"{prefix}-s{switch:02d}-n{index:03d}",
                leaf_switch=f"{prefix}-s{switch:02d}",
                spine=f"{prefix}-spine",
            )
            for switch in range(switches)
            for index in range(per_switch)
        )
    raise TraceFormatError(path, 2, "num_switch", "no cluster row after the header")


def read_gpu_time_samples(
    path: str | Path, *, on_error: OnError = "raise"
) -> tuple[tuple[float, ...], ReadReport]:
    """GPU-seconds per job from a ``yarn-gput*.csv`` sample."""
    report = ReportBuilder(path, on_error)
    samples: list[float] = []
    for row in CsvFile(path, ("duration",)):
        report.row()
        try:
            samples.append(row.number("duration", minimum=0))
        except TraceFormatError as error:
            report.malformed(error)
            continue
        report.kept()
    return tuple(samples), report.build()
