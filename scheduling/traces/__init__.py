"""Readers for public GPU-cluster traces (and gpuportal's generic CSV) into engine types.

File I/O only: no Django, no network. Every reader either raises :class:`TraceFormatError` naming file,
line and column, or (``on_error="skip"``) counts what it skipped in a :class:`ReadReport`.
"""

from scheduling.traces.errors import ReadReport, TraceFormatError
from scheduling.traces.generic import read_generic_csv, write_generic_csv
from scheduling.traces.helios import read_helios_vc_occupancy, read_helios_vc_sizes, read_philly_vc_nodes
from scheduling.traces.openb import read_openb, read_openb_nodes, read_openb_pods
from scheduling.traces.philly import gang_shape, read_philly
from scheduling.traces.records import Trace, TraceJob
from scheduling.traces.registry import UnknownTrace, load_trace, shared_traces_dir
from scheduling.traces.tiresias import read_gpu_time_samples, read_tiresias_cluster, read_tiresias_jobs

__all__ = [
    "ReadReport",
    "Trace",
    "TraceFormatError",
    "TraceJob",
    "UnknownTrace",
    "gang_shape",
    "load_trace",
    "read_generic_csv",
    "read_gpu_time_samples",
    "read_helios_vc_occupancy",
    "read_helios_vc_sizes",
    "read_openb",
    "read_openb_nodes",
    "read_openb_pods",
    "read_philly",
    "read_philly_vc_nodes",
    "read_tiresias_cluster",
    "read_tiresias_jobs",
    "shared_traces_dir",
    "write_generic_csv",
]
