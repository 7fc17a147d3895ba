"""Alibaba openb (FGD, ATC'23): GPU node list and pod lists with GPU-sharing pods.

Files: ``openb_node_list_gpu_node.csv`` (``sn,cpu_milli,memory_mib,gpu,model``) and
``openb_pod_list_*.csv`` (``name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,
creation_time,deletion_time,scheduled_time``; ``gpu_spec`` only in some files). The data is licensed for
research or study only, so the project reads it from a path and never ships a copy.

Mapping to the engine: a pod is a one-member gang. ``num_gpu == 1`` with ``gpu_milli < 1000`` is a
fractional share of one GPU (``gpu_milli``); otherwise ``num_gpu`` whole GPUs on one node; ``num_gpu == 0``
is a CPU-only pod that still consumes CPU and memory (it matters for packing). ``gpu_spec`` ("A|B")
restricts GPU models.
"""

from __future__ import annotations

from pathlib import Path

from scheduling.engine.types import MILLI_PER_GPU, Node, Request, WorkloadKind
from scheduling.traces.csvrows import CsvFile, Row
from scheduling.traces.errors import OnError, ReadReport, ReportBuilder, TraceFormatError
from scheduling.traces.records import Trace, TraceJob

NODE_COLUMNS = ("sn", "cpu_milli", "memory_mib", "gpu", "model")
POD_COLUMNS = ("name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli")
# QoS classes of latency-sensitive serving; everything else in openb is batch-like.
SERVING_QOS = frozenset({"LS", "Guaranteed"})
LICENSE_NOTE = "Alibaba clusterdata: research or study use only; read from path, not redistributed"


def read_openb_nodes(path: str | Path, *, on_error: OnError = "raise") -> tuple[tuple[Node, ...], ReadReport]:
    """Nodes of an openb node list; nodes with no GPU are kept (they still host CPU-only pods)."""
    report = ReportBuilder(path, on_error)
    nodes: list[Node] = []
    for row in CsvFile(path, NODE_COLUMNS):
        report.row()
        try:
            nodes.append(_node(row))
        except TraceFormatError as error:
            report.malformed(error)
            continue
        report.kept()
    return tuple(nodes), report.build()


def _node(row: Row) -> Node:
    cpu = row.integer("cpu_milli", minimum=0)
    memory = row.integer("memory_mib", minimum=0)
    gpus = row.integer("gpu", minimum=0, maximum=64)
    model = row.text("model")
    if model.lower() == "nan":  # pandas wrote missing models of CPU nodes as "nan"
        model = ""
    return Node(
        name=row.text("sn", allow_empty=False),
        gpu_total=gpus,
        gpu_model=model,
        cpu_milli_total=cpu,
        cpu_milli_free=cpu,
        memory_mib_total=memory,
        memory_mib_free=memory,
    )


def read_openb_pods(
    path: str | Path, *, on_error: OnError = "raise"
) -> tuple[tuple[TraceJob, ...], ReadReport]:
    """Pods of an openb pod list as jobs; times are seconds from the trace start.

    ``duration_s`` is ``deletion_time - scheduled_time`` when the pod was scheduled, else ``None``
    (Pending pods never ran). Packing experiments ignore both times.
    """
    report = ReportBuilder(path, on_error)
    jobs: list[TraceJob] = []
    for row in CsvFile(path, POD_COLUMNS):
        report.row()
        try:
            jobs.append(_pod(row))
        except TraceFormatError as error:
            report.malformed(error)
            continue
        report.kept()
    return tuple(jobs), report.build()


def _pod(row: Row) -> TraceJob:
    num_gpu = row.integer("num_gpu", minimum=0, maximum=64)
    gpu_milli = row.integer("gpu_milli", minimum=0, maximum=MILLI_PER_GPU) if num_gpu else 0
    if num_gpu > 1 and gpu_milli != MILLI_PER_GPU:
        raise row.error(
            "gpu_milli", f"a pod with {num_gpu} GPUs must ask for whole GPUs (1000), got {gpu_milli}"
        )
    if num_gpu == 1 and gpu_milli == 0:
        raise row.error("gpu_milli", "a GPU pod must ask for 1..1000 milli-GPU")
    fractional = num_gpu == 1 and gpu_milli < MILLI_PER_GPU
    created = row.number("creation_time", minimum=0, default=0.0) if row.has("creation_time") else 0.0
    request = Request(
        id=row.text("name", allow_empty=False),
        members=1,
        gpus_per_member=0 if fractional else num_gpu,
        gpu_milli=gpu_milli if fractional else 0,
        gpu_models=_gpu_spec(row),
        cpu_milli=row.integer("cpu_milli", minimum=0),
        memory_mib=row.integer("memory_mib", minimum=0),
        kind=WorkloadKind.INFERENCE if row.text("qos") in SERVING_QOS else WorkloadKind.BATCH,
        submitted_at=created,
    )
    return TraceJob(request=request, submit_s=created, duration_s=_lifetime(row))


def _gpu_spec(row: Row) -> frozenset[str]:
    spec = row.text("gpu_spec") if row.has("gpu_spec") else ""
    if not spec or spec.lower() == "nan":
        return frozenset()
    return frozenset(model.strip() for model in spec.split("|") if model.strip())


def _lifetime(row: Row) -> float | None:
    if not (row.has("scheduled_time") and row.has("deletion_time")):
        return None
    if not row.text("scheduled_time") or not row.text("deletion_time"):
        return None
    scheduled = row.number("scheduled_time", minimum=0)
    deleted = row.number("deletion_time", minimum=0)
    return max(0.0, deleted - scheduled)


def read_openb(
    pods_path: str | Path, nodes_path: str | Path, *, on_error: OnError = "raise", name: str | None = None
) -> Trace:
    """An openb pod list together with the node list it is packed onto."""
    nodes, node_report = read_openb_nodes(nodes_path, on_error=on_error)
    jobs, pod_report = read_openb_pods(pods_path, on_error=on_error)
    return Trace(
        name=name or Path(pods_path).stem,
        jobs=jobs,
        nodes=nodes,
        reports=(node_report, pod_report),
        notes={"license": LICENSE_NOTE},
    )
