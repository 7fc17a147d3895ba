"""One round of the demo federation: finish due jobs, admit arrivals, let the engine place the queue.

Each orchestrator schedules only its own pool with its native placement policy; the queue is tried in
priority-then-submit order and a job that does not fit keeps the engine's reason as its pending reason.
"""

from dataclasses import dataclass, field, replace

from scheduling.engine.placement import ClusterState
from scheduling.engine.types import MemberAssignment, Node, Rejection, Request

from .fleet import ORCHESTRATORS
from .trace import DemoJob

MAX_TRIES_PER_ROUND = 300  # bound on queue scanning per orchestrator, like Slurm's bf_max_job_test


@dataclass
class RunningJob:
    job: DemoJob
    started_at: float
    assignments: tuple[MemberAssignment, ...]

    @property
    def ends_at(self) -> float:
        return self.started_at + self.job.duration_s


@dataclass
class FederationState:
    nodes: tuple[Node, ...]
    running: list[RunningJob] = field(default_factory=list)
    pending: list[DemoJob] = field(default_factory=list)
    pending_reasons: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class RoundResult:
    started: tuple[RunningJob, ...]
    finished: tuple[RunningJob, ...]


def request_for(job: DemoJob) -> Request:
    return Request(
        id=job.external_id,
        members=job.gang_size,
        gpus_per_member=job.gpus_per_member,
        team=job.team,
        duration_estimate_s=job.duration_s,
        submitted_at=job.submitted_at,
        orchestrator=job.orchestrator,
    )


def free_nodes(nodes: tuple[Node, ...], running: list[RunningJob]) -> tuple[Node, ...]:
    """Nodes with the GPUs held by running jobs marked used (per GPU index)."""
    used: dict[str, set[int]] = {}
    for run in running:
        for assignment in run.assignments:
            used.setdefault(assignment.node, set()).update(assignment.gpu_indices)
    return tuple(
        replace(node, gpu_free_milli=tuple(0 if i in used.get(node.name, ()) else 1000 for i in range(node.gpu_total)))
        for node in nodes
    )


def advance(state: FederationState, arrivals: list[DemoJob], now: float) -> RoundResult:
    finished = tuple(run for run in state.running if run.ends_at <= now)
    state.running = [run for run in state.running if run.ends_at > now]
    state.pending.extend(arrivals)
    nodes = free_nodes(state.nodes, state.running)
    started: list[RunningJob] = []
    for orch in ORCHESTRATORS:
        pool = ClusterState.from_nodes(node for node in nodes if node.orchestrator == orch.name)
        queue = sorted((job for job in state.pending if job.orchestrator == orch.name), key=lambda j: j.submitted_at)
        for job in queue[:MAX_TRIES_PER_ROUND]:
            request = request_for(job)
            decision = pool.place(request, orch.placement_policy)
            if isinstance(decision, Rejection):
                state.pending_reasons[job.external_id] = decision.message
                continue
            pool.commit(decision, request)
            started.append(RunningJob(job, now, decision.assignments))
    started_ids = {run.job.external_id for run in started}
    state.pending = [job for job in state.pending if job.external_id not in started_ids]
    for job_id in started_ids:
        state.pending_reasons.pop(job_id, None)
    state.running.extend(started)
    return RoundResult(started=tuple(started), finished=finished)
