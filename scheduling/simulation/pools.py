"""A pool of nodes with one queue discipline, as one orchestrator (or the federated fleet) runs it.

Disciplines (what each orchestrator natively does with its queue):

* ``easy``   (Slurm ``sched/backfill``): the engine's ``backfill.easy_backfill`` decides: FIFO (or the
  order the caller gives, e.g. fair share); the first job that does not fit gets a reservation, and
  later jobs start only if they cannot delay it.
* ``greedy`` (kube-scheduler / Volcano): every pending pod group is tried in order; whatever fits starts.
* ``fcfs``   (Ray's task queue as the issue describes it): strict order; the first job that does not
  fit blocks the rest.

Placement inside the pool is always the engine's (``ClusterState.place`` with the pool's placement
policy, directly or inside ``easy_backfill``). Filters that keep long queues fast without changing any
decision: a pass is skipped when every queued whole-GPU job asks for more GPUs than are wholly free (the
engine would start nothing); such jobs are left out of the queue handed to ``easy_backfill`` once the
head is known (the engine would skip them); and within a greedy pass a request shape the engine already
rejected is not offered again (nothing was released in between). ``max_tests`` bounds how many queued
jobs one pass looks at, like Slurm's ``bf_max_job_test``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from scheduling.engine.backfill import RESERVATIONS, BackfillMemory, EasyPass, EndingQueue
from scheduling.engine.fair_queue import FairShareQueue
from scheduling.engine.fragmentation import expected_fragment_milli
from scheduling.engine.placement import ClusterState, invalid_request
from scheduling.engine.preemption import RunningSet
from scheduling.engine.sizemix import normalised_mix
from scheduling.engine.types import (
    MILLI_PER_GPU,
    MemberAssignment,
    Node,
    Placement,
    Request,
    RunningWorkload,
    SizeMix,
    TopologyLevel,
)

if TYPE_CHECKING:
    from scheduling.simulation.replay import JobRun

DISCIPLINES = ("easy", "greedy", "fcfs")
QUEUE_ORDERS = ("fifo", "fairshare", "priority")  # who goes first; the discipline says what may pass whom
DEFAULT_MAX_TESTS = 200


def exclusive_request(request: Request, gpus_per_node: int) -> Request:
    """The whole-node request an exclusive (Slurm ``--exclusive``) job really holds."""
    if request.gpus_per_member >= gpus_per_node or not request.gpus:
        return request
    return replace(request, gpus_per_member=gpus_per_node, gpu_milli=0)


@dataclass(frozen=True)
class PoolSpec:
    name: str
    nodes: tuple[Node, ...]
    discipline: str = "easy"
    placement_policy: str = "best-fit"
    exclusive: bool = False
    max_tests: int = DEFAULT_MAX_TESTS
    preemption: bool = False  # keep the engine's victim index (federated pools)
    queue: str = "fifo"  # fairshare needs a Federation in the replay (it orders by the engine's entitlements)
    # The head's reservation (easy only): "earliest" fit, or "slurm-22.05" (its will-run batches, which also
    # read the end times of work in the other pools: engine/backfill.py)
    reservation: str = "earliest"

    def __post_init__(self) -> None:
        if self.discipline not in DISCIPLINES:
            raise ValueError(f"unknown queue discipline {self.discipline!r}; expected one of {DISCIPLINES}")
        if self.queue not in QUEUE_ORDERS:
            raise ValueError(f"unknown queue order {self.queue!r}; expected one of {QUEUE_ORDERS}")
        if self.reservation not in RESERVATIONS:
            raise ValueError(f"unknown reservation rule {self.reservation!r}; expected one of {RESERVATIONS}")


class Pool:
    def __init__(self, spec: PoolSpec, state: ClusterState, mix: SizeMix) -> None:
        self.spec = spec
        self.name = spec.name
        self.state = state
        self.mix = mix
        self.pending: list[JobRun] = []
        self.cpu_waiting: list[JobRun] = []  # CPU-only jobs: outside the GPU queue, see start_cpu_only
        self.cpu_running: set[int] = set()
        self.running: dict[int, JobRun] = {}
        self.running_by_id: dict[str, JobRun] = {}
        self.ending = EndingQueue()  # ... kept sorted by expected end for the engine's backfill
        self.backfill_memory = BackfillMemory()  # ... which reuses a reservation while nothing changed
        self.victim_index = RunningSet() if spec.preemption else None  # ... and its preemption search
        self._pending_sizes: Counter[float] = Counter()  # whole GPUs per queued job (0 for shares)
        # The queue by team, each team's jobs kept sorted, so a fair-share pass need not sort the whole queue.
        self.fair_queue: FairShareQueue[JobRun] | None = FairShareQueue() if spec.queue == "fairshare" else None
        self._mix = normalised_mix(mix)
        self._fragment_cache: dict[tuple[int, ...], float] = {}
        self.capacity_gpus = sum(node.gpu_total for node in spec.nodes)
        self.gpus_per_node = max((node.gpu_total for node in spec.nodes), default=0)
        self.models = frozenset(node.gpu_model for node in spec.nodes)
        # Expected ends of running work in the other pools, soonest first (set by the replay; the
        # slurm-22.05 reservation reads them)
        self.elsewhere: Callable[[float], list[float]] = lambda now: []

    # -- queue ------------------------------------------------------------------------------------
    def enqueue(self, run: JobRun, *, front: bool = False) -> None:
        run.alloc = self.allocation_request(run.job.request)
        run.whole_gpus = _whole_gpus(run.alloc)  # read for every queued job in every pass: computed once
        if front:
            self.pending.insert(0, run)
        else:
            self.pending.append(run)
        if self.fair_queue is not None:
            self.fair_queue.add(run.alloc, run)
        self._pending_sizes[run.whole_gpus] += 1

    def allocation_request(self, request: Request) -> Request:
        if not self.spec.exclusive:
            return request
        return exclusive_request(request, self.gpus_per_node)

    def never_fits(self, request: Request) -> str:
        """Why ``request`` can never start in this pool even when it is empty ('' if it can)."""
        alloc = self.allocation_request(request)
        problem = invalid_request(alloc)
        if problem:
            return f"the engine refuses the request: {problem}"
        if alloc.gpus > self.capacity_gpus:
            return f"needs {alloc.gpus:g} GPUs, pool {self.name} has {self.capacity_gpus}"
        if alloc.gpus_per_member > self.gpus_per_node:
            return f"a member needs {alloc.gpus_per_member} GPUs, nodes of pool {self.name} have {self.gpus_per_node}"
        if request.gpu_models and not (request.gpu_models & self.models):
            return f"no {'/'.join(sorted(request.gpu_models))} GPU in pool {self.name}"
        return ""

    def cpu_only_never_fits(self, request: Request) -> str:
        """Why a CPU-only job can never start here ('' if it can)."""
        if request.members != 1:
            return "CPU-only gangs are not simulated"
        if not any(
            (not node.cpu_milli_total or node.cpu_milli_total >= request.cpu_milli)
            and (not node.memory_mib_total or node.memory_mib_total >= request.memory_mib)
            for node in self.spec.nodes
        ):
            return f"no node of pool {self.name} has the CPU and memory this CPU-only job asks for"
        return ""

    def start_cpu_only(self, now: float) -> list[JobRun]:
        """Start waiting CPU-only jobs, in order, each on the first node with room for its CPU and memory.

        The engine places GPU requests only (it refuses a request without GPUs) but its ``commit`` reserves
        the CPU and memory of a GPU-less placement, so the simulator picks the node and the engine keeps
        the books (as for CPU-only pods in packing, cpu_only.py). CPU-only jobs never wait behind GPU jobs.
        """
        started: list[JobRun] = []
        for run in self.cpu_waiting:
            request = run.job.request
            for index in range(self.state.node_count):
                name = self.state.node_name(index)
                placement = Placement(
                    request_id=request.id,
                    assignments=(MemberAssignment(member=0, node=name, gpu_indices=(), gpu_milli=0),),
                    topology=TopologyLevel.NVLINK_DOMAIN,
                    reasons=(f"CPU-only job: first node with room, {name}",),
                )
                try:
                    self.state.commit(placement, request)
                except ValueError:
                    continue
                run.alloc, run.placement = request, placement
                self.running[run.index] = run
                self.running_by_id[request.id] = run
                self.cpu_running.add(run.index)
                started.append(run)
                break
        if started:
            gone = {run.index for run in started}
            self.cpu_waiting = [run for run in self.cpu_waiting if run.index not in gone]
        return started

    def might_start_something(self) -> bool:
        """False when every queued job needs more whole GPUs than are free (then nothing can start)."""
        free = self.state.gpu_free
        return any(size <= free for size in self._pending_sizes)

    # -- scheduling -------------------------------------------------------------------------------
    def schedule(
        self, now: float, seed: int, order: Callable[[], list[JobRun]] | None = None
    ) -> list[JobRun]:
        """Start what the discipline allows now; returns the started jobs (already committed).

        ``order`` (called only when a pass happens) returns the queue in the order to serve it.
        """
        if not self.pending or not self.might_start_something():
            return []
        return self._schedule_gpu_jobs(now, seed, order)

    def _schedule_gpu_jobs(
        self, now: float, seed: int, order: Callable[[], list[JobRun]] | None
    ) -> list[JobRun]:
        if order is not None:
            self.pending = order()
        if self.spec.discipline == "easy":
            started = self._easy(now, seed)
        else:
            started = self._in_order(now, seed, strict=self.spec.discipline == "fcfs")
        if started:
            # Started jobs come from the first max_tests positions: only that window is rebuilt.
            gone = {run.index for run in started}
            window = self.spec.max_tests
            self.pending[:window] = [run for run in self.pending[:window] if run.index not in gone]
        return started

    def _in_order(self, now: float, seed: int, *, strict: bool) -> list[JobRun]:
        rejected: set[tuple[object, ...]] = set()
        started: list[JobRun] = []
        for position, run in enumerate(self.pending):
            if position >= self.spec.max_tests or (strict and position > len(started)):
                break
            if self.try_start(run, now, seed, rejected):
                started.append(run)
        return started

    def _easy(self, now: float, seed: int) -> list[JobRun]:
        queue = self._backfill_queue()
        if queue and queue[-1].whole_gpus > self.state.gpu_free:
            # The last job is a head that cannot fit and nothing follows it: the reservation it would get
            # protects no one, so the decision is just the jobs before it, in order (the engine returns
            # before computing a reservation when every job it is given starts).
            queue.pop()
        if not queue:
            return []
        if len(queue) == 1:
            return self._easy_single(queue[0], now, seed)
        # The engine's easy_backfill, reading only the starts: the pass then skips the head's reservation
        # when no later job could use it (easy_backfill's decision would compute it for its reasons).
        easy = EasyPass(self.state, self.ending, now, policy=self.spec.placement_policy, seed=seed,
                        memory=self.backfill_memory, reservation=self.spec.reservation,
                        elsewhere=self.elsewhere(now) if self.spec.reservation != "earliest" else ())
        easy.feed([run.alloc for run in queue if run.alloc is not None])
        by_id = {run.alloc.id: run for run in queue if run.alloc is not None}
        started = []
        for placement in easy.started():
            run = by_id[placement.request_id]
            self.start(run, placement, now)
            started.append(run)
        return started

    def _easy_single(self, run: JobRun, now: float, seed: int) -> list[JobRun]:
        """``easy_backfill`` with a one-job queue, without its copy of the whole fleet's state.

        Exact: the engine places that job on its copy with the same policy and seed (placing never
        changes a state, only committing does) and, with nobody behind it, returns either that placement
        or nothing. On 1,000 nodes the copy was most of a lightly loaded replay's time.
        """
        assert run.alloc is not None
        placement = self.state.place(run.alloc, self.spec.placement_policy, seed=seed)
        if not isinstance(placement, Placement):
            return []
        self.start(run, placement, now)
        return [run]

    def _backfill_queue(self) -> list[JobRun]:
        """The first ``max_tests`` queued jobs, minus those after the head that cannot fit now by GPU count.

        Exact: the engine starts jobs in order until one fails (a job asking for more whole GPUs than are
        free fails at the latest), and skips any later job that does not fit.
        """
        free = self.state.gpu_free
        window = self.pending[: self.spec.max_tests]
        for position, run in enumerate(window):
            if run.whole_gpus > free:
                return window[: position + 1] + [later for later in window[position + 1 :] if later.whole_gpus <= free]
        return window

    def try_start(self, run: JobRun, now: float, seed: int, rejected: set[tuple[object, ...]]) -> bool:
        request = run.alloc
        assert request is not None
        if run.whole_gpus > self.state.gpu_free:
            return False
        shape = (request.members, request.gpus_per_member, request.gpu_milli, request.gpu_models, request.topology)
        if shape in rejected:
            return False
        outcome = self.state.place(request, self.spec.placement_policy, seed=seed * 1_000_003 + run.index)
        if not isinstance(outcome, Placement):
            rejected.add(shape)
            return False
        self.start(run, outcome, now)
        return True

    def start(self, run: JobRun, placement: Placement, now: float) -> None:
        """Commit ``placement`` for ``run`` (queued) and register it with the engine's running index."""
        assert run.alloc is not None
        self.state.commit(placement, run.alloc)
        run.placement = placement
        self.running[run.index] = run
        self.running_by_id[run.alloc.id] = run
        self._pending_sizes[run.whole_gpus] -= 1
        if not self._pending_sizes[run.whole_gpus]:
            del self._pending_sizes[run.whole_gpus]
        if self.fair_queue is not None:
            self.fair_queue.remove(run.alloc)
        estimate = run.job.request.duration_estimate_s
        workload = RunningWorkload(
            id=run.alloc.id,
            team=run.team,
            gpus=run.alloc.gpus,
            assignments=placement.assignments,
            priority=run.job.request.priority,
            started_at=now,
            kind=run.job.request.kind,
            expected_end=now + estimate if estimate > 0 else None,
        )
        self.ending.add(workload)
        if self.victim_index is not None:
            self.victim_index.add(workload)

    def start_queued(self, run: JobRun, placement: Placement, now: float) -> None:
        """Start a queued job out of turn (after preemption made room where ``placement`` says)."""
        self.pending.remove(run)
        self.start(run, placement, now)

    def release(self, run: JobRun) -> None:
        assert run.placement is not None and run.alloc is not None
        self.state.release(run.placement, run.alloc)
        del self.running[run.index]
        del self.running_by_id[run.alloc.id]
        if run.index in self.cpu_running:
            self.cpu_running.discard(run.index)
            return
        self.ending.remove(run.alloc.id)
        if self.victim_index is not None:
            self.victim_index.remove(run.alloc.id)

    def fragmented_gpus(self) -> float:
        """The engine's fleet fragmentation, per node from its free vector, cached per distinct vector."""
        total = 0.0
        cache = self._fragment_cache
        for i in range(self.state.node_count):
            signature = tuple(sorted(self.state.free_vector(i)))
            value = cache.get(signature)
            if value is None:
                value = cache[signature] = expected_fragment_milli(signature, self._mix)
            total += value
        return total / MILLI_PER_GPU

    @property
    def allocated_gpus(self) -> float:
        return self.state.gpu_allocated_milli / MILLI_PER_GPU


def _whole_gpus(request: Request) -> float:
    """Whole GPUs a request needs free (0 for a GPU share, which may fit on a partly used GPU)."""
    return 0.0 if request.gpu_milli else request.gpus
