"""Node lists (``--fleet``): the machines a trace is replayed or packed on.

Three formats, recognised from the header, whatever the file is called:

* gpuportal's fleet CSV: required ``name,gpus,gpu_model``; optional ``cpu_milli,memory_mib,leaf_switch,
  nvlink_domain``. An empty ``nvlink_domain`` makes the node its own NVLink domain. Without a
  ``leaf_switch`` column, hosts are put 32 to a leaf switch in file order (as the synthetic fleet is);
  with the column, an empty value makes the node its own leaf (the engine never assumes a shared switch).
* an openb node list (``sn,cpu_milli,memory_mib,gpu,model``), under any file name;
* Alibaba's 2026 spot-GPU ``node_info_df.csv`` (``node_name,gpu_model,gpu_capacity_num,cpu_num``,
  see ``alibaba_spot.py``).

Every malformed row names file, line and column; node names must be unique.
"""

from __future__ import annotations

import csv
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from scheduling.engine.types import Node
from scheduling.traces import alibaba_spot, openb
from scheduling.traces.csvrows import CsvFile, Row, read_unique
from scheduling.traces.errors import OnError, ReadReport, ReportBuilder, TraceFormatError

FLEET_COLUMNS = ("name", "gpus", "gpu_model")
FLEET_OPTIONAL = ("cpu_milli", "memory_mib", "leaf_switch", "nvlink_domain")
NODES_PER_LEAF = 32
MAX_GPUS_PER_NODE = 64


def read_node_list(path: str | Path, *, on_error: OnError = "raise") -> tuple[tuple[Node, ...], ReadReport]:
    """Nodes of a fleet CSV, an openb node list or an Alibaba spot-GPU node list, chosen by the header."""
    columns = _header(Path(path))
    if set(FLEET_COLUMNS) <= columns:
        return read_fleet_csv(path, on_error=on_error)
    if set(openb.NODE_COLUMNS) <= columns:
        return openb.read_openb_nodes(path, on_error=on_error)
    if set(alibaba_spot.NODE_COLUMNS) <= columns:
        spot_nodes, report = alibaba_spot.read_spot_gpu_nodes(path, on_error=on_error)
        return _leaves_in_file_order(spot_nodes), report
    raise TraceFormatError(
        path,
        1,
        FLEET_COLUMNS[0],
        f"header {sorted(columns)} is neither a fleet CSV ({','.join(FLEET_COLUMNS)}), "
        f"an openb node list ({','.join(openb.NODE_COLUMNS)}) "
        f"nor an Alibaba spot-GPU node list ({','.join(alibaba_spot.NODE_COLUMNS)})",
    )


def read_fleet_csv(path: str | Path, *, on_error: OnError = "raise") -> tuple[tuple[Node, ...], ReadReport]:
    report = ReportBuilder(path, on_error)
    rows = CsvFile(path, FLEET_COLUMNS)
    nodes = read_unique(rows, report, _node, lambda node: node.name, column="name", what="node name")
    if "leaf_switch" not in rows.columns:
        nodes = list(_leaves_in_file_order(nodes))
    report.ignored_columns = tuple(c for c in rows.columns if c not in FLEET_COLUMNS + FLEET_OPTIONAL)
    return tuple(nodes), report.build()


def _leaves_in_file_order(nodes: Sequence[Node]) -> tuple[Node, ...]:
    """Hosts share a leaf switch ``NODES_PER_LEAF`` at a time, as the synthetic fleet does."""
    return tuple(replace(node, leaf_switch=f"leaf{i // NODES_PER_LEAF:03d}") for i, node in enumerate(nodes))


def _node(row: Row) -> Node:
    name = row.text("name", allow_empty=False)
    cpu = row.integer("cpu_milli", minimum=0) if row.text("cpu_milli") else 0
    memory = row.integer("memory_mib", minimum=0) if row.text("memory_mib") else 0
    return Node(
        name=name,
        gpu_total=row.integer("gpus", minimum=0, maximum=MAX_GPUS_PER_NODE),
        gpu_model=row.text("gpu_model"),
        cpu_milli_total=cpu,
        cpu_milli_free=cpu,
        memory_mib_total=memory,
        memory_mib_free=memory,
        nvlink_domain=row.text("nvlink_domain") or name,
        leaf_switch=row.text("leaf_switch"),
        spine="spine0",
    )


def _header(path: Path) -> set[str]:
    if not path.is_file():
        raise FileNotFoundError(f"node list not found: {path}")
    with path.open(newline="", encoding="utf-8-sig") as handle:
        return {column.strip() for column in next(csv.reader(handle), [])}
