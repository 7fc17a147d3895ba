"""Resolve ``--trace NAME_OR_PATH``: a short name for a known public trace, or a file whose format is
recognised from its header.

Public traces live outside the project (``../shared/traces`` next to the checkout, or the directory in
``GPUPORTAL_TRACES_DIR``): openb is licensed for research or study only and is never copied in.
"""

from __future__ import annotations

import csv
import os
from dataclasses import replace
from pathlib import Path

from scheduling.traces import generic, nodes, openb, philly, tiresias
from scheduling.traces.errors import OnError, TraceFormatError
from scheduling.traces.records import Trace

OPENB_DIR = Path("alibaba-clusterdata/cluster-trace-gpu-v2023/csv")
OPENB_NODES = OPENB_DIR / "openb_node_list_gpu_node.csv"
PHILLY_CSV = Path("philly/petuum-adaptdl-osdi21-artifact/simulator/traces/philly.csv")
TIRESIAS_60 = Path("tiresias/simulator/60_job.csv")
DEMO_PHILLY = Path(__file__).resolve().parents[1] / "demo_data" / "philly_slice.csv"

NAMED = {
    "philly": PHILLY_CSV,
    "tiresias-60": TIRESIAS_60,
}


class UnknownTrace(LookupError):
    pass


def shared_traces_dir() -> Path:
    """``$GPUPORTAL_TRACES_DIR`` or ``<checkout>/../shared/traces``."""
    configured = os.environ.get("GPUPORTAL_TRACES_DIR")
    if configured:
        return Path(configured)
    return Path(__file__).resolve().parents[2].parent / "shared" / "traces"


def trace_names() -> tuple[str, ...]:
    return (*NAMED, "philly-demo", "openb-<variant> (e.g. openb-default, openb-gpushare40)")


def load_trace(
    name_or_path: str,
    *,
    on_error: OnError = "raise",
    traces_dir: Path | None = None,
    fleet: str | Path | None = None,
) -> Trace:
    """Read a named or a path trace; raises :class:`UnknownTrace` with the known names otherwise.

    ``fleet`` is a node list (fleet CSV or openb node list, any file name, see ``nodes.py``); it replaces
    whatever nodes the trace comes with (for an openb pod list, the node list beside it is then not read).
    """
    root = traces_dir or shared_traces_dir()
    path = _named_path(name_or_path, root)
    if path is None:
        path = Path(name_or_path)
        if not path.is_file():
            raise UnknownTrace(f"no trace named or at {name_or_path!r}; known names: {', '.join(trace_names())}")
    if not path.is_file():
        raise FileNotFoundError(f"trace {name_or_path!r} expected at {path}, which does not exist")
    if fleet is None:
        return _read_by_header(path, on_error, root)
    fleet_nodes, fleet_report = nodes.read_node_list(fleet, on_error=on_error)
    if not fleet_nodes:
        raise TraceFormatError(fleet, 1, nodes.FLEET_COLUMNS[0], "the node list has no nodes")
    if set(openb.POD_COLUMNS) <= _header(path) and not set(philly.PHILLY_COLUMNS) <= _header(path):
        jobs, pod_report = openb.read_openb_pods(path, on_error=on_error)  # the fleet replaces the sibling list
        trace = Trace(name=path.stem, jobs=jobs, reports=(pod_report,), notes={"license": openb.LICENSE_NOTE})
    else:
        trace = _read_by_header(path, on_error, root)
    return replace(trace, nodes=fleet_nodes, reports=(fleet_report, *trace.reports))


def _named_path(name: str, root: Path) -> Path | None:
    if name in NAMED:
        return root / NAMED[name]
    if name == "philly-demo":
        return DEMO_PHILLY
    if name.startswith("openb-"):
        return root / OPENB_DIR / f"openb_pod_list_{name.removeprefix('openb-')}.csv"
    if name.startswith("openb_pod_list_"):
        return root / OPENB_DIR / f"{name.removesuffix('.csv')}.csv"
    return None


def _read_by_header(path: Path, on_error: OnError, root: Path) -> Trace:
    columns = _header(path)
    if set(philly.PHILLY_COLUMNS) <= columns:
        return philly.read_philly(path, on_error=on_error)
    if set(openb.POD_COLUMNS) <= columns:
        return openb.read_openb(path, _openb_nodes_for(path, root), on_error=on_error)
    if set(generic.REQUIRED_COLUMNS) <= columns:
        return generic.read_generic_csv(path, on_error=on_error)
    if set(tiresias.JOB_COLUMNS) <= columns:
        return tiresias.read_tiresias_jobs(path, on_error=on_error)
    raise UnknownTrace(
        f"{path}: header {sorted(columns)} matches no known format (philly, openb pods, generic, tiresias)"
    )


def _header(path: Path) -> set[str]:
    with path.open(newline="", encoding="utf-8-sig") as handle:
        return {column.strip() for column in next(csv.reader(handle), [])}


def _openb_nodes_for(pods: Path, root: Path) -> Path:
    """The GPU node list next to the pod list, else the shared one."""
    sibling = pods.with_name(OPENB_NODES.name)
    return sibling if sibling.is_file() else root / OPENB_NODES
