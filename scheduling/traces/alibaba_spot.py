"""Alibaba's 2026 spot-GPU node list (``cluster-trace-v2026-spot-gpu/node_info_df.csv``) as a ``--fleet``.

Columns (the trace's README): ``node_name`` (unique id, a number), ``gpu_model`` (``A10``,
``A100-SXM4-80GB``, ``H800``, ``GPU-series-1``...), ``gpu_capacity_num`` (GPUs on the node; the same
model comes in several sizes) and ``cpu_num`` (vCPUs). Mapping: the node keeps its name and model as
written, ``cpu_num`` becomes milli-cores; memory and topology are not in the file, so memory is not
tracked, each host is its own NVLink domain, and ``nodes.read_node_list`` puts hosts 32 to a leaf switch
in file order (as for a fleet CSV without a ``leaf_switch`` column). The data is for research or study
use only: read from a path, never shipped.
"""

from __future__ import annotations

from pathlib import Path

from scheduling.engine.types import Node
from scheduling.traces.csvrows import CsvFile, Row, read_unique
from scheduling.traces.errors import OnError, ReadReport, ReportBuilder

NODE_COLUMNS = ("node_name", "gpu_model", "gpu_capacity_num", "cpu_num")
MILLI_PER_CPU = 1000


def read_spot_gpu_nodes(path: str | Path, *, on_error: OnError = "raise") -> tuple[tuple[Node, ...], ReadReport]:
    """Nodes of ``node_info_df.csv`` in file order (no leaf switches: the file has no topology)."""
    report = ReportBuilder(path, on_error)
    rows = CsvFile(path, NODE_COLUMNS)
    nodes = read_unique(rows, report, _node, lambda node: node.name, column="node_name", what="node name")
    report.ignored_columns = tuple(c for c in rows.columns if c not in NODE_COLUMNS)
    return tuple(nodes), report.build()


def _node(row: Row) -> Node:
    name = row.text("node_name", allow_empty=False)
    cpu = row.integer("cpu_num", minimum=0) * MILLI_PER_CPU
    return Node(
        name=name,
        gpu_total=row.integer("gpu_capacity_num", minimum=0, maximum=64),
        gpu_model=row.text("gpu_model", allow_empty=False),
        cpu_milli_total=cpu,
        cpu_milli_free=cpu,
        nvlink_domain=name,
        spine="spine0",
    )
