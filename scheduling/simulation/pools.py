"""A pool of nodes with one queue discipline, as one orchestrator (or the federated fleet) runs it.

Disciplines (what each orchestrator natively does with its queue):

* ``easy``   (Slurm ``sched/backfill``): FIFO; when the head does not fit it gets a reservation at the
  earliest time enough GPUs free up (from running jobs' expected ends), and later jobs may start now
  only if they end before that time or fit in the GPUs the reservation leaves spare.
* ``greedy`` (kube-scheduler / Volcano): every pending pod group is tried in order; whatever fits starts.
* ``fcfs``   (Ray's task queue as the issue describes it): strict order; the first job that does not
  fit blocks the rest.

Placement inside the pool is always ``ClusterState.place`` with the pool's placement policy.
Two cheap filters keep long queues fast without changing any decision: a job asking for more GPUs
than are free is not offered to the engine, and within one pass a request shape the engine already
rejected is not offered again (nothing was released in between). ``max_tests`` bounds how many queued
jobs one pass looks at, like Slurm's ``bf_max_job_test``.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from scheduling.engine.fragmentation import fragmented_gpus
from scheduling.engine.placement import ClusterState
from scheduling.engine.types import MILLI_PER_GPU, Node, Placement, Request, SizeMix

if TYPE_CHECKING:
    from scheduling.simulation.replay import JobRun

DISCIPLINES = ("easy", "greedy", "fcfs")
DEFAULT_MAX_TESTS = 200


@dataclass(frozen=True)
class PoolSpec:
    name: str
    nodes: tuple[Node, ...]
    discipline: str = "easy"
    placement_policy: str = "best-fit"
    exclusive: bool = False
    max_tests: int = DEFAULT_MAX_TESTS

    def __post_init__(self) -> None:
        if self.discipline not in DISCIPLINES:
            raise ValueError(f"unknown queue discipline {self.discipline!r}; expected one of {DISCIPLINES}")


class Pool:
    def __init__(self, spec: PoolSpec, state: ClusterState, mix: SizeMix) -> None:
        self.spec = spec
        self.name = spec.name
        self.state = state
        self.mix = mix
        self.pending: list[JobRun] = []
        self.running: dict[int, JobRun] = {}
        self.capacity_gpus = sum(node.gpu_total for node in spec.nodes)
        self.gpus_per_node = max((node.gpu_total for node in spec.nodes), default=0)
        self.models = frozenset(node.gpu_model for node in spec.nodes)

    # -- queue ------------------------------------------------------------------------------------
    def enqueue(self, run: JobRun, *, front: bool = False) -> None:
        run.alloc = self.allocation_request(run.job.request)
        if front:
            self.pending.insert(0, run)
        else:
            self.pending.append(run)

    def allocation_request(self, request: Request) -> Request:
        if not self.spec.exclusive:
            return request
        from scheduling.simulation.replay import exclusive_request

        return exclusive_request(request, self.gpus_per_node)

    def never_fits(self, request: Request) -> str:
        """Why ``request`` can never start in this pool even when it is empty ('' if it can)."""
        alloc = self.allocation_request(request)
        if alloc.gpus > self.capacity_gpus:
            return f"needs {alloc.gpus:g} GPUs, pool {self.name} has {self.capacity_gpus}"
        if alloc.gpus_per_member > self.gpus_per_node:
            return f"a member needs {alloc.gpus_per_member} GPUs, nodes of pool {self.name} have {self.gpus_per_node}"
        if request.gpu_models and not (request.gpu_models & self.models):
            return f"no {'/'.join(sorted(request.gpu_models))} GPU in pool {self.name}"
        return ""

    # -- scheduling -------------------------------------------------------------------------------
    def schedule(self, now: float, seed: int, order: Sequence[JobRun] | None = None) -> Iterator[JobRun]:
        """Start what the discipline allows now; yields each started job (already committed)."""
        if order is not None:
            self.pending = list(order)
        if self.spec.discipline == "easy":
            yield from self._easy(now, seed)
        else:
            yield from self._in_order(seed, strict=self.spec.discipline == "fcfs")

    def _in_order(self, seed: int, *, strict: bool) -> Iterator[JobRun]:
        rejected: set[tuple[object, ...]] = set()
        kept: list[JobRun] = []
        for position, run in enumerate(self.pending):
            if position >= self.spec.max_tests or (strict and kept):
                kept.extend(self.pending[position:])
                break
            if self.try_start(run, seed, rejected):
                yield run
            else:
                kept.append(run)
        self.pending = kept

    def _easy(self, now: float, seed: int) -> Iterator[JobRun]:
        rejected: set[tuple[object, ...]] = set()
        while self.pending and self.try_start(self.pending[0], seed, rejected):
            yield self.pending.pop(0)
        if len(self.pending) < 2:
            return
        shadow, spare = self.reservation(self.pending[0], now)
        kept = [self.pending[0]]
        for position, run in enumerate(self.pending[1:], start=1):
            if position > self.spec.max_tests:
                kept.extend(self.pending[position:])
                break
            assert run.alloc is not None
            ends_in_time = now + run.job.request.duration_estimate_s <= shadow
            if (ends_in_time or run.alloc.gpus <= spare) and self.try_start(run, seed, rejected):
                if not ends_in_time:
                    spare -= run.alloc.gpus
                yield run
            else:
                kept.append(run)
        self.pending = kept

    def reservation(self, head: JobRun, now: float) -> tuple[float, float]:
        """EASY's shadow time (when the head could start, by GPU count) and the GPUs spare then."""
        assert head.alloc is not None
        free = self.state.gpu_free
        needed = head.alloc.gpus
        ends = sorted(
            (run.start + run.job.request.duration_estimate_s if run.start is not None else now, run.allocated_gpus)
            for run in self.running.values()
        )
        if free >= needed:
            # Enough GPUs in the wrong places (fragmentation): the next completion is the earliest
            # moment the head might fit, and nothing is spare until then.
            return (max(ends[0][0], now) if ends else float("inf")), 0.0
        for end, gpus in ends:
            free += gpus
            if free >= needed:
                return max(end, now), free - needed
        return float("inf"), 0.0

    def try_start(self, run: JobRun, seed: int, rejected: set[tuple[object, ...]]) -> bool:
        request = run.alloc
        assert request is not None
        if request.gpus > self.state.gpu_free:
            return False
        shape = (request.members, request.gpus_per_member, request.gpu_milli, request.gpu_models, request.topology)
        if shape in rejected:
            return False
        outcome = self.state.place(request, self.spec.placement_policy, seed=seed * 1_000_003 + run.index)
        if not isinstance(outcome, Placement):
            rejected.add(shape)
            return False
        self.state.commit(outcome, request)
        run.placement = outcome
        self.running[run.index] = run
        return True

    def release(self, run: JobRun) -> None:
        assert run.placement is not None and run.alloc is not None
        self.state.release(run.placement, run.alloc)
        del self.running[run.index]

    def fragmented_gpus(self) -> float:
        return fragmented_gpus(self.state.nodes(), self.mix)

    @property
    def allocated_gpus(self) -> float:
        return self.state.gpu_allocated_milli / MILLI_PER_GPU
