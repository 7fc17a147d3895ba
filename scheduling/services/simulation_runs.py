"""Replays fanned out over Celery workers: capacity searches, multi-seed runs and sweeps.

A replay is described by a JSON-safe spec (``trace``, ``policy``, optional ``capacity_gpus``, ``seed``,
``on_error`` (``raise``, or ``skip`` malformed trace rows, as ``load_trace``) and ``give_up_above_p95_h``
with ``give_up_target``: end the replay once that p95 is certainly above the bound, as capacity probes do);
``replay_figures`` runs one (what the ``replay_trace`` task calls), ``run_replays`` runs a list: as one
Celery group on the app's broker when the app has a result backend to collect answers from, else one after
the other in this process. The simulator is deterministic for a spec, so both
ways give the same figures (less ``wall_time_s``), in the order of the specs.

``fan_out`` and ``fan_out_then`` are that machinery for any task: the what-if run (services/whatif.py) uses
``fan_out_then``, a chord, because it is itself a task and must not block a worker slot waiting for its parts.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from celery import Celery, chord, current_app, group

from scheduling.simulation import simulate_replay
from scheduling.simulation.capacity import (
    CapacitySearch,
    P95CertainlyAbove,
    smallest_capacity_in_rounds,
    target_measure,
)
from scheduling.traces import load_trace

TASK = "scheduling.tasks.replay_trace"
SPEC_KEYS = {"trace", "policy", "capacity_gpus", "seed", "give_up_above_p95_h", "give_up_target", "on_error"}
RESULT_TIMEOUT_S = 3600.0


def replay_figures(spec: Mapping[str, Any]) -> dict[str, Any]:
    """The replay JSON for one spec, without its wall time (the one figure two runs never share)."""
    _check(spec)
    trace = load_trace(str(spec["trace"]), on_error=spec.get("on_error", "raise"))
    bound = spec.get("give_up_above_p95_h")
    give_up = P95CertainlyAbove(float(bound), str(spec.get("give_up_target", "fleet"))) if bound is not None else None
    result = simulate_replay(
        trace, str(spec["policy"]), seed=int(spec.get("seed", 0)), capacity_gpus=spec.get("capacity_gpus"),
        give_up=give_up,
    )
    return {key: value for key, value in result.figures.items() if key != "wall_time_s"}


def run_replays(specs: Sequence[Mapping[str, Any]], *, app: Celery | None = None) -> list[dict[str, Any]]:
    """Figures for each spec, in order: one task per spec on the app's workers, or here without a backend."""
    for spec in specs:
        _check(spec)
    return fan_out(TASK, [dict(spec) for spec in specs], replay_figures, app=app)


def fan_out(
    task: str, payloads: Sequence[Any], run_here: Callable[[Any], Any], *, app: Celery | None = None
) -> list[Any]:
    """``task`` on each payload as one group on the app's workers, waiting for the answers in order; or
    ``run_here`` on each, one after the other, when the app has no result backend (or runs tasks eagerly).
    Call it outside a task: a task waiting on a group holds a worker slot its parts may need."""
    app = app or current_app
    if _answers_here(app):
        return [run_here(payload) for payload in payloads]
    return list(_group(app, task, payloads).apply_async().get(timeout=RESULT_TIMEOUT_S))


def fan_out_then(
    task: str,
    payloads: Sequence[Any],
    run_here: Callable[[Any], Any],
    then: tuple[str, Callable[..., Any], Sequence[Any]],
    *,
    app: Celery | None = None,
) -> bool:
    """``task`` on each payload, then ``then`` = (callback task, its function, extra args) called with the list
    of answers (in payload order) and the extra args: a Celery chord that returns at once (True), or both
    steps here (False). A part that raises stops the chord: the callback never runs."""
    app = app or current_app
    callback_task, callback_here, args = then
    if _answers_here(app):
        callback_here([run_here(payload) for payload in payloads], *args)
        return False
    chord(_group(app, task, payloads), app.signature(callback_task, args=list(args))).apply_async()
    return True


def _answers_here(app: Celery) -> bool:
    return not app.conf.result_backend or bool(app.conf.task_always_eager)


def _group(app: Celery, task: str, payloads: Sequence[Any]) -> group:
    return group(app.signature(task, args=[payload]) for payload in payloads)


def search_capacity(
    spec: Mapping[str, Any],
    *,
    low: int,
    high: int,
    step: int,
    target: str = "fleet",
    target_hours: float = 1.0,
    width: int = 1,
    app: Celery | None = None,
    ceiling: int | None = None,
    early_stop: bool = True,
    on_round: Callable[[list[tuple[int, dict[str, Any]]]], None] | None = None,
) -> CapacitySearch:
    """``capacity.smallest_capacity_in_rounds`` with each round's ``width`` replays run by ``run_replays``;
    each probe gives up as soon as it certainly misses the target (same answer, see ``P95CertainlyAbove``;
    ``early_stop=False`` runs every probe to the end). ``ceiling``: the largest capacity probed (see
    ``smallest_capacity_in_rounds``). ``on_round`` is called after each round with its (capacity, figures)
    pairs, for a caller that reports more than the one measured value; a capacity already probed is not
    replayed again."""
    value_of = target_measure(target)
    give_up = {"give_up_above_p95_h": target_hours, "give_up_target": target} if early_stop else {}
    measured: dict[int, float] = {}

    def measure_many(capacities: Sequence[int]) -> list[float]:
        new = [capacity for capacity in dict.fromkeys(capacities) if capacity not in measured]
        if new:
            runs = run_replays([{**spec, **give_up, "capacity_gpus": capacity} for capacity in new], app=app)
            measured.update((capacity, value_of(figures)) for capacity, figures in zip(new, runs, strict=True))
            if on_round is not None:
                on_round(list(zip(new, runs, strict=True)))
        return [measured[capacity] for capacity in capacities]

    return smallest_capacity_in_rounds(
        measure_many, low=low, high=high, step=step, target=target_hours, width=width, ceiling=ceiling
    )


def _check(spec: Mapping[str, Any]) -> None:
    unknown = set(spec) - SPEC_KEYS
    if unknown:
        raise ValueError(f"replay spec: unknown field(s) {sorted(unknown)}; expected {sorted(SPEC_KEYS)}")
    for field in ("trace", "policy"):
        if not spec.get(field):
            raise ValueError(f"replay spec: field {field!r} is required")
    if spec.get("on_error", "raise") not in ("raise", "skip"):
        raise ValueError(f"replay spec: on_error {spec['on_error']!r}: expected 'raise' or 'skip'")
