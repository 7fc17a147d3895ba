"""Six shipped weeks of the Philly trace as an endless loop of demo jobs, mapped to teams and orchestrators.

Real time maps onto trace time as ``(t - EPOCH) * speedup``, cut into trace-week cycles. Every cycle that
starts in one real week plays the same shipped week, and the next real week plays the next shipped week
(the sixth is followed by the first): at the default speedup of 6 a real week runs its trace week six
times, so a weekly report compares two different weeks of the trace (with a single shipped week every
week-over-week change read 0.0). The same instant always yields the same jobs: rounds can be retried and
history refilled idempotently.
"""

import bisect
import csv
import math
from collections import Counter
from dataclasses import dataclass
from datetime import datetime
from functools import cache
from pathlib import Path

from .fleet import team_for_vc

WEEKS = Path(__file__).resolve().parent.parent / "demo_data" / "philly_weeks.csv"
WEEKS_START = datetime(2017, 10, 30)  # a Monday, local trace time: the first of the six shipped weeks
WEEK_S = 7 * 24 * 3600
EPOCH_S = 1767571200.0  # Monday 2026-01-05 00:00 UTC: trace weekdays line up with real ones
MAX_DURATION_S = 24 * 3600  # the demo caps trace jobs at a day so its queue reaches a steady state


@dataclass(frozen=True)
class DemoJob:
    external_id: str
    orchestrator: str
    team: str
    user: str
    kind: str
    gang_size: int
    gpus_per_member: int
    submitted_at: float
    duration_s: float

    @property
    def gpus(self) -> int:
        return self.gang_size * self.gpus_per_member


@dataclass(frozen=True)
class _Row:
    offset_s: float
    duration_s: float
    gpus: int
    vc: str
    team_ordinal: int  # the row's place among its team's rows, so each person gets a share of their own team's jobs


@cache
def trace_weeks(path: Path = WEEKS) -> tuple[tuple[_Row, ...], ...]:
    """The shipped weeks in trace order, each its rows with offsets from its own Monday 00:00."""
    seen: Counter[str] = Counter()
    weeks: list[list[_Row]] = []
    with path.open(newline="") as handle:
        for row in csv.DictReader(handle):
            team = team_for_vc(row["cluster"])
            offset = (datetime.fromisoformat(row["timestamp"]) - WEEKS_START).total_seconds()
            week = int(offset // WEEK_S)
            while len(weeks) <= week:
                weeks.append([])
            weeks[week].append(
                _Row(
                    offset - week * WEEK_S,
                    min(float(row["duration"]), MAX_DURATION_S),
                    int(row["num_gpus"]),
                    row["cluster"],
                    seen[team],
                )
            )
            seen[team] += 1
    return tuple(tuple(week) for week in weeks)


def week_of_cycle(cycle: int, speedup: float) -> int:
    """The shipped week a trace cycle plays: the one of the real week the cycle starts in (cycle ``c`` starts
    ``c / speedup`` real weeks after the epoch), so consecutive real weeks play consecutive trace weeks."""
    return math.floor(cycle / max(speedup, 1.0)) % len(trace_weeks())


def gang_shape(gpus: int) -> tuple[int, int]:
    """Members × GPUs per member: up to 8 GPUs fit one node; larger jobs are multi-node gangs."""
    if gpus <= 8:
        return 1, gpus
    for per_member in (8, 4, 2):
        if gpus % per_member == 0:
            return gpus // per_member, per_member
    return gpus, 1


def route(gpus: int, duration_s: float, team: str) -> tuple[str, str]:
    """(orchestrator, kind) for a trace job, by shape: the demo's stand-in for observed submissions."""
    if gpus > 8:
        return "slurm-hpc", "training"
    if team == "inference":
        return "k8s-serving", "inference"
    if gpus == 1 and duration_s <= 2 * 3600:
        return "ray-sweeps", "hpo"
    if duration_s > 6 * 3600:
        return "slurm-hpc", "training"
    return "k8s-serving", "batch"


def arrivals(start_s: float, end_s: float, speedup: float) -> list[DemoJob]:
    """Jobs whose real submission time falls in (start_s, end_s], epoch seconds."""
    first = math.floor((start_s - EPOCH_S) * speedup / WEEK_S)
    last = math.floor((end_s - EPOCH_S) * speedup / WEEK_S)
    jobs: list[DemoJob] = []
    for cycle in range(first, last + 1):
        week = week_of_cycle(cycle, speedup)
        rows, offsets = trace_weeks()[week], _offsets(week)
        low = (start_s - EPOCH_S) * speedup - cycle * WEEK_S
        high = (end_s - EPOCH_S) * speedup - cycle * WEEK_S
        for index in range(bisect.bisect_right(offsets, low), bisect.bisect_right(offsets, high)):
            real = EPOCH_S + (cycle * WEEK_S + rows[index].offset_s) / speedup
            jobs.append(_job(f"philly-w{week + 1}-{cycle}-{index}", rows[index], real, speedup))
    return jobs


@cache
def _offsets(week: int) -> list[float]:
    return [row.offset_s for row in trace_weeks()[week]]


# The demo's people submit every seventh job of their team, so "My workloads" shows alice and bob their own in
# any stretch of history (counted per team: the trace's row number once left bob none for hours).
DEMO_SUBMITTERS = {"nlp": "alice", "inference": "bob"}


def _user(team: str, team_ordinal: int) -> str:
    if team_ordinal % 7 == 0 and team in DEMO_SUBMITTERS:
        return DEMO_SUBMITTERS[team]
    return f"{team}-user{team_ordinal % 7 + 1}"


def _job(external_id: str, row: _Row, submitted_at: float, speedup: float) -> DemoJob:
    team = team_for_vc(row.vc)
    orchestrator, kind = route(row.gpus, row.duration_s, team)
    members, per_member = gang_shape(row.gpus)
    return DemoJob(
        external_id=external_id,
        orchestrator=orchestrator,
        team=team,
        user=_user(team, row.team_ordinal),
        kind=kind,
        gang_size=members,
        gpus_per_member=per_member,
        submitted_at=submitted_at,
        duration_s=max(row.duration_s / speedup, 1.0),
    )
