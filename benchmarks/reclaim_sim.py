"""Keeping guarantees on the simulator (issue 31): the federated replay of a public trace with guarantees that
nothing takes back ("copies": today's portal, where each orchestrator got a copy of the guarantee and no reclaim
ran) against the same replay where each cycle ``engine.reclaim.plan_reclaims`` takes borrowed GPUs back for teams
below their guarantee (min-runtime 10 min, grace 5 min, bounded by the owner's pending demand).

Figures per policy, one JSON line each: GPU-hours during which a team below its guarantee waited while other
teams held GPUs above theirs (all of it, and the part beyond the grace), utilisation, p95 wait per team,
preemptions and GPU-hours of work lost, CPU seconds.

    .venv/bin/python benchmarks/reclaim_sim.py                  # Philly, whole trace, a round every 10 min
    .venv/bin/python benchmarks/reclaim_sim.py --days 14 --round-s 3600
    .venv/bin/python benchmarks/reclaim_sim.py --trace philly-demo
    .venv/bin/python benchmarks/reclaim_sim.py --trace openb-default   # Alibaba openb; teams = QoS classes

The public traces live in ../shared/traces (or $GPUPORTAL_TRACES_DIR); without them the run prints one line
saying it was skipped and why.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from scheduling.engine.reclaim import ReclaimPolicy, plan_reclaims
from scheduling.simulation.federation import Federation
from scheduling.simulation.replay import JobRun, Replay
from scheduling.simulation.runner import build_fleet, build_scenario, default_capacity, pools_for
from scheduling.traces import load_trace
from scheduling.traces.records import TraceJob
from scheduling.traces.registry import OPENB_DIR, UnknownTrace, shared_traces_dir

POLICY = ReclaimPolicy(min_runtime_s=600.0, grace_s=300.0)


@dataclass
class Starvation:
    """GPU-seconds a team below its guarantee waited while borrowed GPUs existed, measured each cycle.

    ``gpu_s``: all of it; ``beyond_grace_gpu_s``: the part after the team had lacked for the grace (the figure
    earlier reports gave; a team whose claims arrive continuously never leaves its episode, so a job queued a
    minute ago counts as "beyond the grace" there). The *per-claim* figures count, for each queued job that
    fits within what its team lacks, only the time that job itself has waited beyond the grace
    (``overdue``) and beyond the grace plus one round (``overdue_round``: the issue's promise is that borrowed
    GPUs come back "within one round plus a grace period"), never more than the team's lack.

    Each overdue GPU-second is put in one of three kinds by the engine's own reclaim decision on that claim at
    that moment (``plan_reclaims``, run dry under the "copies" policy too, so both policies are judged alike):
    *reclaimable* (a set of borrowed gangs within every rule frees room for it now), *protected* (no such set:
    the borrowers there are inside their minimum runtime, at their own guarantee, or hold gangs bigger than the
    owner's demand within its guarantee, which the issue's bound forbids taking; the wait is legitimate) or
    *free* (it fits in free GPUs: the orchestrator's own queue order holds it, not a borrower).
    """

    round_s: float = 600.0
    gpu_s: float = 0.0
    beyond_grace_gpu_s: float = 0.0
    overdue: dict[str, float] = field(default_factory=dict)  # kind -> GPU-seconds
    overdue_round: dict[str, float] = field(default_factory=dict)
    since: dict[str, float] = field(default_factory=dict)
    last: float | None = None

    def measure(self, replay: Replay) -> None:
        now = replay.now
        step = 0.0 if self.last is None else now - self.last
        self.last = now
        demand, held = replay.team_demand()
        guarantee = {team: replay.scenario.guarantee(team) for team in demand}
        borrowed = sum(max(0.0, gpus - replay.scenario.guarantee(team)) for team, gpus in held.items())
        kinds: dict[str, str] | None = None
        queued = [run for pool in replay.pools.values() for run in pool.pending]
        for team in demand:
            holds = held.get(team, 0.0)
            deficit = guarantee[team] - holds
            # pending work that would fit within the guarantee (Kueue's reclaimWithinCohort rule): a job bigger
            # than what the team lacks is fair share's to order, not reclaim's
            fitting = [run for run in queued if run.team == team and run.gpus <= deficit + 1e-9]
            lack = min(deficit, sum(run.gpus for run in fitting), borrowed)
            if lack <= 1e-9:
                self.since.pop(team, None)
                continue
            started = self.since.setdefault(team, now)
            self.gpu_s += lack * step
            if now - started >= POLICY.grace_s:
                self.beyond_grace_gpu_s += lack * step
            overdue = _waited_beyond(fitting, now, POLICY.grace_s, step)
            if not overdue:
                continue
            kinds = claim_kinds(replay) if kinds is None else kinds
            scale = min(1.0, lack * step / sum(overdue.values()))  # never more than the team's lack
            beyond_round = _waited_beyond(fitting, now, POLICY.grace_s + self.round_s, step)
            for run_id, gpu_s in overdue.items():
                kind = kinds.get(run_id, "protected")
                self.overdue[kind] = self.overdue.get(kind, 0.0) + gpu_s * scale
                later = beyond_round.get(run_id, 0.0) * scale
                self.overdue_round[kind] = self.overdue_round.get(kind, 0.0) + later


def _waited_beyond(runs: list[JobRun], now: float, allowance: float, step: float) -> dict[str, float]:
    """Per queued job (its request id), GPU-seconds of the last ``step`` it spent waiting beyond ``allowance``."""
    found = {}
    for run in runs:
        beyond = min(step, max(0.0, now - run.job.submit_s - allowance))
        if beyond > 0 and run.alloc is not None:
            found[run.alloc.id] = run.gpus * beyond
    return found


def claim_kinds(replay: Replay) -> dict[str, str]:
    """The engine's reclaim decision now, run dry on every pool: per claim (request id), "reclaimable" when it
    would be served, "free" when it fits in free GPUs, "protected" when no borrowed gangs within the rules do."""
    kinds: dict[str, str] = {}
    guarantees = {team.name: float(team.guaranteed) for team in replay.scenario.teams}
    for pool in replay.pools.values():
        if pool.victim_index is None or not pool.pending:
            continue
        claims = [dataclasses.replace(run.alloc, submitted_at=run.job.submit_s) for run in pool.pending
                  if run.alloc is not None]
        decision = plan_reclaims(pool.state, list(pool.victim_index), claims, guarantees, now=replay.now,
                                 policy=POLICY)
        kinds.update((reclaim.request_id, "reclaimable") for reclaim in decision.reclaims)
        kinds.update((passed.request_id, "free" if "fits in free GPUs" in passed.why else "protected")
                     for passed in decision.passed)
    return kinds


@dataclass
class Copies(Federation):
    """Fair-share order only: a guarantee is a number nobody enforces once others borrow."""

    starvation: Starvation = field(default_factory=Starvation)

    def cycle(self, replay: Replay) -> None:
        self.starvation.measure(replay)
        self.refresh_entitlements(replay)


@dataclass
class SplitReclaim(Copies):
    """Each cycle, per pool, the engine's reclaim decision carried out: victims requeued, owners started."""

    reclaimed_gpus: float = 0.0
    passed_gpu_s: dict[str, float] = field(default_factory=dict)  # claims past the grace not served, by why
    round_s: float = 600.0

    def cycle(self, replay: Replay) -> None:
        super().cycle(replay)
        guarantees = {team.name: float(team.guaranteed) for team in replay.scenario.teams}
        for pool in replay.pools.values():
            if pool.victim_index is None or not pool.pending:
                continue
            waiting = {run.alloc.id: run for run in pool.pending if run.alloc is not None}
            claims = [dataclasses.replace(run.alloc, submitted_at=run.job.submit_s) for run in waiting.values()
                      if run.alloc is not None]
            decision = plan_reclaims(pool.state, list(pool.victim_index), claims, guarantees, now=replay.now,
                                     policy=POLICY)
            for passed in decision.passed:
                why = _why(passed.why)
                if why:
                    gpus = waiting[passed.request_id].gpus
                    self.passed_gpu_s[why] = self.passed_gpu_s.get(why, 0.0) + gpus * self.round_s
            for reclaim in decision.reclaims:
                for victim_id in dict.fromkeys(v.workload_id for v in reclaim.victims):
                    run = pool.running_by_id[victim_id]
                    self.lost_gpu_s += run.allocated_gpus * (replay.now - (run.start or replay.now))
                    self.on_stop(run)
                    replay.preempt(run)
                    self.preemptions += 1
                self.reclaimed_gpus += reclaim.gpus
                owner = waiting[reclaim.request_id]
                pool.start_queued(owner, reclaim.placement, replay.now)
                replay.started(owner, pool)


PASSED = (
    ("grace", ""),  # not yet due: not a failure
    ("would exceed its guarantee", ""),  # not a claim: bigger than what the team lacks
    ("more than the", "victims larger than the owner's pending demand within its guarantee"),
    ("minimum runtime", "borrowers inside their minimum runtime"),
    ("fits in free GPUs", "fits in free GPUs (the scheduler starts it)"),
)


def _why(text: str) -> str:
    """A passed claim's reason, in the categories the report counts ("" for claims not (yet) due)."""
    for needle, category in PASSED:
        if needle in text:
            return category
    return "no set of borrowed gangs frees room for it in one place (placement / gang)"


def openb_teams(jobs: list[TraceJob], trace_name: str) -> list[TraceJob]:
    """The openb pod lists name no tenant: each pod's team is its QoS class (LS latency-sensitive serving, BE
    best-effort batch, Burstable, Guaranteed), read from the same public CSV by pod name, the way a site gives
    serving and batch their own guarantees."""
    path = shared_traces_dir() / OPENB_DIR / f"openb_pod_list_{trace_name.removeprefix('openb-')}.csv"
    with path.open(newline="", encoding="utf-8-sig") as handle:
        qos = {row["name"]: row["qos"] or "none" for row in csv.DictReader(handle)}
    return [dataclasses.replace(job, request=dataclasses.replace(job.request, team=qos.get(job.request.id, "none")))
            for job in jobs]


def run(trace_name: str, days: float, federation: Copies, round_s: float = 600.0) -> dict[str, object]:
    trace = load_trace(trace_name)
    horizon = days * 86400 if days else None
    jobs = openb_teams(list(trace.jobs), trace_name) if trace_name.startswith("openb-") else trace.jobs
    capacity = default_capacity(jobs)
    nodes = build_fleet(capacity)
    scenario = build_scenario(jobs, sum(node.gpu_total for node in nodes))
    pools = pools_for("federated", nodes, scenario, jobs)
    federation.starvation.round_s = round_s
    if isinstance(federation, SplitReclaim):
        federation.round_s = round_s
    started = time.process_time()
    result = Replay(jobs, pools, scenario, policy="federated", seed=0, federation=federation,
                    horizon_s=horizon, sample_interval_s=round_s).run()
    figures = result.figures
    return {
        "benchmark": "reclaim_sim", "trace": trace.name, "days": days or "all", "policy": type(federation).__name__,
        "capacity_gpus": capacity, "round_s": round_s, "grace_s": POLICY.grace_s,
        "min_runtime_s": POLICY.min_runtime_s,
        "starved_gpu_h": round(federation.starvation.gpu_s / 3600, 1),
        "starved_beyond_grace_gpu_h": round(federation.starvation.beyond_grace_gpu_s / 3600, 1),
        "overdue_gpu_h": _h(sum(federation.starvation.overdue.values())),
        "overdue_gpu_h_by_kind": {kind: _h(gpu_s) for kind, gpu_s in sorted(federation.starvation.overdue.items())},
        "overdue_beyond_round_gpu_h": _h(sum(federation.starvation.overdue_round.values())),
        "overdue_beyond_round_gpu_h_by_kind": {
            kind: _h(gpu_s) for kind, gpu_s in sorted(federation.starvation.overdue_round.items())},
        "utilisation": _round(figures["utilisation"], 4), "allocation": _round(figures["allocation"], 4),
        "p95_wait_h_by_team": {team: _round(t["wait_p95_hours_counting_unstarted"])
                               for team, t in figures["teams"].items()},
        "preemptions": federation.preemptions, "lost_gpu_h": round(federation.lost_gpu_s / 3600, 1),
        "passed_claims_gpu_h": {why: round(gpu_s / 3600, 1)
                                for why, gpu_s in sorted(getattr(federation, "passed_gpu_s", {}).items())},
        "cpu_time_s": round(time.process_time() - started, 1),
    }


def _h(gpu_s: float) -> float:
    return round(gpu_s / 3600, 1)


def _round(value: object, digits: int = 2) -> object:
    return round(value, digits) if isinstance(value, float) else value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trace", default="philly")
    parser.add_argument("--days", type=float, default=0.0, help="replay this many days (0: the whole trace)")
    parser.add_argument("--round-s", type=float, default=600.0, help="seconds between rounds (reclaim and measure)")
    args = parser.parse_args()
    try:
        load_trace(args.trace)
    except (FileNotFoundError, UnknownTrace) as absent:  # the public traces live beside the project, not in it
        print(json.dumps({"benchmark": "reclaim_sim", "trace": args.trace, "skipped": str(absent)}), flush=True)
        return
    for federation in (Copies(), SplitReclaim()):
        print(json.dumps(run(args.trace, args.days, federation, args.round_s)), flush=True)


if __name__ == "__main__":
    main()
