"""What readers return: engine types plus the two facts a trace adds (when a job arrived, how long it ran)."""

from __future__ import annotations

from dataclasses import dataclass, field

from scheduling.engine.types import Node, Request
from scheduling.traces.errors import ReadReport


@dataclass(frozen=True, slots=True)
class TraceJob:
    """One unit of demand from a trace.

    ``request.submitted_at`` equals ``submit_s`` and ``request.duration_estimate_s`` is what a scheduler
    may know in advance (the traces carry no user estimates, so readers set it to the true run time:
    the "perfect estimate" backfill baseline). ``duration_s`` is the run time the simulator replays;
    ``None`` means the job never ends (packing traces, where pods are never deleted).
    """

    request: Request
    submit_s: float
    duration_s: float | None

    @property
    def id(self) -> str:
        return self.request.id

    @property
    def gpus(self) -> float:
        return self.request.gpus


@dataclass(frozen=True)
class Trace:
    """A workload (and, when the trace has one, the node inventory it ran on)."""

    name: str
    jobs: tuple[TraceJob, ...]
    nodes: tuple[Node, ...] = ()
    reports: tuple[ReadReport, ...] = ()
    notes: dict[str, str] = field(default_factory=dict)

    @property
    def rows_skipped(self) -> int:
        return sum(report.rows_skipped for report in self.reports)

    @property
    def gpu_capacity(self) -> int:
        return sum(node.gpu_total for node in self.nodes)

    def teams(self) -> tuple[str, ...]:
        return tuple(sorted({job.request.team for job in self.jobs}))
