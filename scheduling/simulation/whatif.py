"""One what-if run: recorded jobs replayed on a given fleet, teams and pool calendar (no Django).

The replay is the simulator's ``federated`` policy (one shared pool, FGD placement, EASY backfill in
fair-share order, preemption of borrowed capacity: the federation the portal runs), with the portal's
own teams (weights, guarantees, burst limits) instead of ones derived from the trace. On top of the
simulator's figures it reports, per hourly sample:

* **floor breaches** per orchestrator: in a pool-policy window, jobs routed to that orchestrator wanted
  GPUs and held fewer than ``min(demand, floor)``. The replay does not enforce floors (the live rebalancer
  does, by moving nodes); it shows where the demand of those weeks would have broken them;
* **waits per team** (p50/p95/mean hours from submission to first start).

``run_whatif(inputs)`` is what the portal's Celery task calls; a test runs the same inputs through
``Replay`` directly and compares. ``inputs_as_json``/``inputs_from_json`` carry the inputs to another
worker in a JSON message (the baseline and the scenario run in parallel there), exactly: decoding gives an
equal ``WhatIfInputs``.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, fields
from typing import Any

from scheduling.engine.calendar import PolicyRule, bounds_at
from scheduling.engine.types import Node, Request, TeamSpec, TopologyLevel, WorkloadKind
from scheduling.simulation.federation import Federation
from scheduling.simulation.progress import ProgressCallback
from scheduling.simulation.replay import Replay
from scheduling.simulation.results import HOUR
from scheduling.simulation.runner import pools_for
from scheduling.simulation.scenario import Scenario
from scheduling.simulation.stats import summary
from scheduling.traces.records import TraceJob

MINUTES_PER_WEEK = 7 * 24 * 60
POLICY = "federated"


@dataclass(frozen=True)
class WhatIfInputs:
    """Everything one run needs; ``epoch_minute_of_week`` places trace time 0 on the pool calendar
    (0 = Monday 00:00 in the portal's time zone). Rules name orchestrators by kind, like the jobs."""

    jobs: tuple[TraceJob, ...]
    nodes: tuple[Node, ...]
    teams: tuple[TeamSpec, ...]
    rules: tuple[PolicyRule, ...] = ()
    epoch_minute_of_week: int = 0
    seed: int = 0
    horizon_s: float | None = None


def scenario_for(inputs: WhatIfInputs) -> Scenario:
    """The portal's teams as the simulator's scenario; a team's home orchestrator is where most of its jobs ran."""
    by_team: dict[str, Counter[str]] = defaultdict(Counter)
    hours: dict[str, float] = defaultdict(float)
    for job in inputs.jobs:
        by_team[job.request.team][job.request.orchestrator or "kubernetes"] += 1
        hours[job.request.team] += job.gpus * (job.duration_s or 0.0) / HOUR
    known = {spec.name for spec in inputs.teams}
    extra = tuple(TeamSpec(name=team) for team in sorted(by_team) if team not in known)
    return Scenario(
        orchestrator_of_team={team: counts.most_common(1)[0][0] for team, counts in by_team.items()},
        teams=(*inputs.teams, *extra),
        gpu_hours_by_team=dict(hours),
        rules=("teams, weights and guarantees: the portal's queues", "orchestrator: as recorded per job"),
    )


class WhatIfReplay(Replay):
    """The federated replay plus per-orchestrator floor accounting at every sample."""

    def __init__(self, inputs: WhatIfInputs, scenario: Scenario, progress: ProgressCallback | None) -> None:
        pools = pools_for(POLICY, inputs.nodes, scenario, inputs.jobs)
        super().__init__(
            inputs.jobs,
            pools,
            scenario,
            policy=POLICY,
            seed=inputs.seed,
            federation=Federation(),
            horizon_s=inputs.horizon_s,
            progress=progress,
        )
        self.rules = inputs.rules
        self.epoch_minute = inputs.epoch_minute_of_week
        self.floor_hours: Counter[str] = Counter()
        self.breach_hours: Counter[str] = Counter()
        self.breach_gpu_hours: defaultdict[str, float] = defaultdict(float)

    def sample(self) -> None:
        super().sample()
        if not self.rules:
            return
        minute = int(self.epoch_minute + self.now // 60) % MINUTES_PER_WEEK
        bounds = bounds_at(self.rules, minute // 1440 + 1, minute % 1440)
        held, wanted = self.orchestrator_demand()
        for orchestrator, bound in bounds.items():
            if bound.floor_gpus <= 0:
                continue
            self.floor_hours[orchestrator] += 1
            owed = min(wanted.get(orchestrator, 0.0), float(bound.floor_gpus))
            short = owed - held.get(orchestrator, 0.0)
            if short > 1e-9:
                self.breach_hours[orchestrator] += 1
                self.breach_gpu_hours[orchestrator] += short * self.sample_interval_s / HOUR

    def orchestrator_demand(self) -> tuple[dict[str, float], dict[str, float]]:
        """GPUs jobs of each orchestrator hold, and hold plus wait for, now."""
        held: dict[str, float] = defaultdict(float)
        wanted: dict[str, float] = defaultdict(float)
        for pool in self.pools.values():
            for run in pool.running.values():
                held[run.orchestrator] += run.gpus
                wanted[run.orchestrator] += run.gpus
            for run in pool.pending:
                wanted[run.orchestrator] += run.gpus
        return held, wanted


def run_whatif(inputs: WhatIfInputs, progress: ProgressCallback | None = None) -> dict[str, object]:
    """Replay ``inputs``; the simulator's figures plus floor breaches, waits per team and a summary."""
    if not inputs.nodes:
        raise ValueError("the fleet has no nodes: nothing to replay on")
    replay = WhatIfReplay(inputs, scenario_for(inputs), progress)
    figures = replay.run().as_dict()
    figures["waits_by_team"] = waits_by_team(replay)
    figures["floor_breaches"] = {
        name: {
            "hours_with_floor": replay.floor_hours[name],
            "hours_breached": replay.breach_hours[name],
            "gpu_hours_short": round(replay.breach_gpu_hours[name], 3),
        }
        for name in sorted(replay.floor_hours)
    }
    by_model: Counter[str] = Counter()
    for node in inputs.nodes:
        by_model[node.gpu_model] += node.gpu_total
    figures["capacity_by_model"] = dict(sorted(by_model.items()))
    return figures


def waits_by_team(replay: Replay) -> dict[str, dict[str, float | int | None]]:
    waits: dict[str, list[float]] = defaultdict(list)
    for run in replay.runs:
        if run.first_start is not None:
            waits[run.team].append((run.first_start - run.job.submit_s) / HOUR)
    queued = Counter(run.team for run in replay.runs if run.first_start is None and not run.rejected)
    teams = sorted(set(waits) | set(queued))
    return {team: {**summary(waits.get(team, [])), "never_started": queued.get(team, 0)} for team in teams}


# --- the inputs as a JSON message --------------------------------------------------------------------------

REQUEST_FIELDS = tuple(f.name for f in fields(Request))


def inputs_as_json(inputs: WhatIfInputs) -> dict[str, Any]:
    """JSON-safe inputs; a job is a row (request values in field order, submit, duration) to keep 100,000 small."""
    return {
        "jobs": [[[_plain(getattr(job.request, name)) for name in REQUEST_FIELDS], job.submit_s, job.duration_s]
                 for job in inputs.jobs],
        "nodes": [_record(node) for node in inputs.nodes],
        "teams": [_record(team) for team in inputs.teams],
        "rules": [_record(rule) for rule in inputs.rules],
        "epoch_minute_of_week": inputs.epoch_minute_of_week,
        "seed": inputs.seed,
        "horizon_s": inputs.horizon_s,
    }


def inputs_from_json(data: dict[str, Any]) -> WhatIfInputs:
    """The inverse of ``inputs_as_json`` (also after a JSON round trip: lists back to tuples and sets)."""
    return WhatIfInputs(
        jobs=tuple(TraceJob(_request(values), submit, duration) for values, submit, duration in data["jobs"]),
        nodes=tuple(Node(**{**node, "gpu_free_milli": tuple(node["gpu_free_milli"])}) for node in data["nodes"]),
        teams=tuple(TeamSpec(**team) for team in data["teams"]),
        rules=tuple(PolicyRule(**{**rule, "weekdays": frozenset(rule["weekdays"])}) for rule in data["rules"]),
        epoch_minute_of_week=data["epoch_minute_of_week"],
        seed=data["seed"],
        horizon_s=data["horizon_s"],
    )


def _request(values: list[Any]) -> Request:
    given = dict(zip(REQUEST_FIELDS, values, strict=True))
    return Request(
        **{
            **given,
            "gpu_models": frozenset(given["gpu_models"]),
            "topology": TopologyLevel(given["topology"]),
            "kind": WorkloadKind(given["kind"]),
        }
    )


def _record(record: Any) -> dict[str, Any]:
    return {f.name: _plain(getattr(record, f.name)) for f in fields(record)}


def _plain(value: Any) -> Any:
    """Sets as sorted lists (a message must not depend on set order), tuples as lists, enums as their value."""
    if isinstance(value, frozenset):
        return sorted(value)
    if isinstance(value, tuple):
        return list(value)
    return value.value if isinstance(value, TopologyLevel | WorkloadKind) else value
