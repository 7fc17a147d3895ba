"""Who runs where: map a trace's teams (Philly VCs) to orchestrators and give them entitlements.

Philly has no orchestrators, so each VC is assigned to the one whose native workload its jobs look
like (the rule is deliberately simple and printed in every report):

* **slurm** when at least half of the VC's GPU-hours come from jobs of 8 or more GPUs (gang training);
* **ray** when at least 90% of its jobs use one GPU and its median job is shorter than an hour
  (many short trials);
* **kubernetes** (Volcano batch) otherwise.

A job whose request names an orchestrator (generic CSV ``orchestrator`` column) keeps it.

Entitlements: each team's weight is its share of the trace's GPU-hours; its guarantee is
``GUARANTEED_FRACTION`` of that share of the fleet (the rest is the lendable burst pool).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

from scheduling.engine.types import TeamSpec
from scheduling.simulation.stats import median
from scheduling.traces.records import TraceJob

GANG_GPUS = 8
SLURM_GANG_SHARE = 0.5
RAY_SINGLE_GPU_SHARE = 0.9
RAY_MEDIAN_SECONDS = 3600.0
GUARANTEED_FRACTION = 0.6


@dataclass(frozen=True)
class Scenario:
    orchestrator_of_team: dict[str, str]
    teams: tuple[TeamSpec, ...]
    gpu_hours_by_team: dict[str, float]
    rules: tuple[str, ...]

    def orchestrator_for(self, job: TraceJob) -> str:
        return job.request.orchestrator or self.orchestrator_of_team.get(job.request.team, "kubernetes")

    def guarantee(self, team: str) -> float:
        return float(self._spec(team).guaranteed) if self._spec(team) else 0.0

    def weight(self, team: str) -> float:
        spec = self._spec(team)
        return max(spec.weight if spec else 0.0, 1e-6)

    def _spec(self, team: str) -> TeamSpec | None:
        return self._by_name.get(team)

    @cached_property
    def _by_name(self) -> dict[str, TeamSpec]:
        return {spec.name: spec for spec in self.teams}

    def demand_share_by_orchestrator(self) -> dict[str, float]:
        shares: dict[str, float] = defaultdict(float)
        total = sum(self.gpu_hours_by_team.values()) or 1.0
        for team, hours in self.gpu_hours_by_team.items():
            shares[self.orchestrator_of_team[team]] += hours / total
        return dict(shares)

    def as_dict(self) -> dict[str, object]:
        return {
            "orchestrator_of_team": dict(sorted(self.orchestrator_of_team.items())),
            "teams": [
                {"name": t.name, "weight": round(t.weight, 3), "guaranteed": t.guaranteed, "burst_limit": t.burst_limit}
                for t in self.teams
            ],
            "rules": list(self.rules),
        }


def orchestrator_by_shape(jobs: Sequence[TraceJob]) -> str:
    gpu_hours = sum(job.gpus * (job.duration_s or 0.0) for job in jobs)
    gang_hours = sum(job.gpus * (job.duration_s or 0.0) for job in jobs if job.gpus >= GANG_GPUS)
    if gpu_hours and gang_hours / gpu_hours >= SLURM_GANG_SHARE:
        return "slurm"
    single = sum(1 for job in jobs if job.gpus <= 1)
    typical = median([job.duration_s or 0.0 for job in jobs]) or 0.0
    if single / len(jobs) >= RAY_SINGLE_GPU_SHARE and typical < RAY_MEDIAN_SECONDS:
        return "ray"
    return "kubernetes"


def build_scenario(jobs: Sequence[TraceJob], capacity_gpus: int) -> Scenario:
    by_team: dict[str, list[TraceJob]] = defaultdict(list)
    for job in jobs:
        by_team[job.request.team].append(job)
    hours = {team: sum(j.gpus * (j.duration_s or 0.0) for j in team_jobs) / 3600 for team, team_jobs in by_team.items()}
    total = sum(hours.values()) or 1.0
    teams = tuple(
        TeamSpec(
            name=team,
            weight=100 * hours[team] / total,
            guaranteed=int(GUARANTEED_FRACTION * capacity_gpus * hours[team] / total),
            burst_limit=None,
        )
        for team in sorted(by_team)
    )
    return Scenario(
        orchestrator_of_team={team: orchestrator_by_shape(team_jobs) for team, team_jobs in by_team.items()},
        teams=teams,
        gpu_hours_by_team=hours,
        rules=(
            f"slurm: >= {SLURM_GANG_SHARE:.0%} of the team's GPU-hours in jobs of >= {GANG_GPUS} GPUs",
            f"ray: >= {RAY_SINGLE_GPU_SHARE:.0%} one-GPU jobs and median duration < {RAY_MEDIAN_SECONDS / 3600:g} h",
            "kubernetes: every other team",
            f"weight = share of GPU-hours; guaranteed = {GUARANTEED_FRACTION:.0%} of that share of the fleet",
        ),
    )
