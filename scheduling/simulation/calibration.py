"""Calibrating the simulator against a real Slurm run (``benchmarks/calibrate_slurm.py``).

Pure helpers, no Slurm and no Django, so each part is tested without a cluster: pick and compress a
trace window, describe the partitions both as slurm.conf lines and as a ``--pools`` TOML, read the
jobs' submit/start/end back from ``sacct --json`` and compute the error table.
"""

from __future__ import annotations

import json
import math
import re
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from scheduling.simulation.stats import summary
from scheduling.traces.records import TraceJob
from scheduling.traces.slurm import sacct_number

# Seconds of margin above the compressed run time before rounding the limit up to whole minutes:
# covers Slurm's launch latency, so a job is never killed by its own limit.
LIMIT_MARGIN_S = 5.0


@dataclass(frozen=True)
class CalibJob:
    """One job as submitted to Slurm and replayed in the simulator (compressed seconds)."""

    name: str
    team: str
    members: int
    gpus_per_member: int
    submit_s: float
    duration_s: float
    limit_min: int

    @property
    def gpus(self) -> int:
        return self.members * self.gpus_per_member


@dataclass(frozen=True)
class Partition:
    name: str
    hostlist: str
    teams: tuple[str, ...]


@dataclass(frozen=True)
class Timing:
    """What Slurm recorded for one job (epoch seconds). ``logged_submit``: the submission to the
    millisecond from slurmctld's log (``log_submit_times``), when the run kept it; sacct has whole seconds."""

    submit: float
    start: float
    end: float
    logged_submit: float | None = None

    @property
    def replay_submit(self) -> float:
        """When the simulator's replay submits the job: the log's time if known, else sacct's."""
        return self.submit if self.logged_submit is None else self.logged_submit


_SUBMIT_LINE = re.compile(
    r"^\[(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?)\] _slurm_rpc_submit_batch_job: JobId=(\d+) ", re.M
)


def compress(
    jobs: Sequence[TraceJob],
    *,
    start_s: float,
    count: int,
    factor: float,
    max_duration_s: float,
    min_duration_s: float = 1.0,
) -> list[CalibJob]:
    """The first ``count`` jobs submitted at or after ``start_s``, with times divided by ``factor``.

    Durations are capped at ``max_duration_s`` (compressed) so the run drains in bounded real time,
    and floored at ``min_duration_s`` (a shorter ``sleep`` is all launch overhead). The limit is the
    run time plus a margin, rounded up to whole minutes, as Slurm only takes whole minutes.
    """
    if factor <= 0:
        raise ValueError(f"factor: must be > 0, got {factor:g}")
    window = [job for job in jobs if job.submit_s >= start_s][:count]
    if len(window) < count:
        raise ValueError(f"count: only {len(window)} jobs at or after {start_s:g} s, {count} asked")
    origin = window[0].submit_s
    out = []
    for index, job in enumerate(window):
        duration = min(max(job.duration_s / factor, min_duration_s), max_duration_s)
        out.append(
            CalibJob(
                name=f"c{index:04d}",
                team=job.request.team,
                members=job.request.members,
                gpus_per_member=int(job.request.gpus_per_member),
                submit_s=round((job.submit_s - origin) / factor, 3),
                duration_s=round(duration, 3),
                limit_min=math.ceil((duration + LIMIT_MARGIN_S) / 60),
            )
        )
    return out


def split_teams(jobs: Sequence[CalibJob], groups: int) -> list[tuple[str, ...]]:
    """Teams in ``groups`` groups: the largest teams (by GPU-seconds) alone, the rest in the last."""
    load: dict[str, float] = {}
    for job in jobs:
        load[job.team] = load.get(job.team, 0.0) + job.gpus * job.duration_s
    ranked = sorted(load, key=lambda team: (-load[team], team))
    head = [(team,) for team in ranked[: groups - 1]]
    return [*head, tuple(sorted(ranked[groups - 1 :]))] if ranked[groups - 1 :] else head


def node_shares(jobs: Sequence[CalibJob], groups: Sequence[tuple[str, ...]], nodes: int) -> list[int]:
    """Nodes per group, in proportion to its GPU-seconds, at least one each (largest remainder)."""
    if nodes < len(groups):
        raise ValueError(f"nodes: {nodes} nodes cannot give each of {len(groups)} partitions one")
    load = [sum(j.gpus * j.duration_s for j in jobs if j.team in group) for group in groups]
    total = sum(load) or 1.0
    spare = nodes - len(groups)
    exact = [spare * share / total for share in load]
    counts = [1 + int(value) for value in exact]
    order = sorted(range(len(groups)), key=lambda i: -(exact[i] - int(exact[i])))
    for i in order[: nodes - sum(counts)]:
        counts[i] += 1
    return counts


def partitions(groups: Sequence[tuple[str, ...]], counts: Sequence[int]) -> list[Partition]:
    """Consecutive node ranges ``dgx[..]`` (the fixture's names), one partition per group."""
    out, first = [], 1
    for index, (group, count) in enumerate(zip(groups, counts, strict=True)):
        last = first + count - 1
        out.append(Partition(f"p{index + 1}", f"dgx[{first:02d}-{last:02d}]", group))
        first = last + 1
    return out


def slurm_partition_lines(parts: Sequence[Partition], *, exclusive: bool) -> list[str]:
    share = "EXCLUSIVE" if exclusive else "NO"
    return [
        f"PartitionName={part.name} Nodes={part.hostlist} AllowAccounts={','.join(part.teams)} "
        f"OverSubscribe={share} MaxTime=UNLIMITED State=UP"
        for part in parts
    ]


def pools_toml(
    parts: Sequence[Partition], *, exclusive: bool, backfill_depth: int, reservation: str = "earliest"
) -> str:
    """The same partitions as a ``--pools`` file (FIFO queue, EASY backfill like sched/backfill, the head's
    reservation by ``reservation``: "slurm-22.05" is the fixture's will-run rule, see engine/backfill.py)."""
    blocks = []
    for part in parts:
        teams = ", ".join(json.dumps(team) for team in part.teams)
        blocks.append(
            "[[pool]]\n"
            f'name = "{part.name}"\n'
            f'nodes = "{part.hostlist}"\n'
            f"teams = [{teams}]\n"
            'queue = "fifo"\n'
            'backfill = "easy"\n'
            f"backfill_depth = {backfill_depth}\n"
            f'reservation = "{reservation}"\n'
            f"nodes_shared = {'false' if exclusive else 'true'}\n"
            "preemption = false\n"
        )
    return "\n".join(blocks)


def fleet_csv(nodes: int, gpus_per_node: int = 8) -> str:
    rows = [f"dgx{n:02d},{gpus_per_node},H100" for n in range(1, nodes + 1)]
    return "name,gpus,gpu_model\n" + "\n".join(rows) + "\n"


def generic_csv(jobs: Sequence[CalibJob], submits: Mapping[str, float] | None = None) -> str:
    """The job list in the generic CSV format; ``submits`` (by name) overrides the planned times."""
    lines = ["id,submit_time,duration,gang_size,gpus_per_member,gpu_model,team,kind,orchestrator,time_limit"]
    for job in jobs:
        submit = submits.get(job.name, job.submit_s) if submits else job.submit_s
        lines.append(
            f"{job.name},{submit:.3f},{job.duration_s:.3f},{job.members},{job.gpus_per_member},H100,"
            f"{job.team},training,slurm,{job.limit_min * 60}"
        )
    return "\n".join(lines) + "\n"


def parse_sacct_json(text: str) -> dict[str, Timing]:
    """Submit/start/end by job name from ``sacct --json``; jobs that never ran are left out.

    Raises ValueError naming the job and key when a started job's record is malformed.
    """
    data = json.loads(text)
    if not isinstance(data, dict) or not isinstance(data.get("jobs"), list):
        raise ValueError("sacct --json: expected an object with a 'jobs' list")
    out: dict[str, Timing] = {}
    for index, job in enumerate(data["jobs"]):
        times = job.get("time", {}) if isinstance(job, dict) else {}
        name = job.get("name") if isinstance(job, dict) else None
        submit, start, end = (sacct_number(times.get(key)) for key in ("submission", "start", "end"))
        if not start or not end:
            continue
        if not isinstance(name, str) or submit is None:
            raise ValueError(f"sacct --json: jobs[{index}]: 'name' and 'time.submission' are required")
        if end < start:
            raise ValueError(f"sacct --json: jobs[{index}] ({name}): time.end is before time.start")
        logged = times.get("submission_log")
        out[name] = Timing(submit, start, end, float(logged) if isinstance(logged, int | float) else None)
    return out


def log_submit_times(log: str, sacct: str) -> dict[int, float]:
    """Each job's submission to the millisecond (epoch seconds, by job id) from slurmctld's log.

    sacct keeps whole seconds, which loses the order of a submission and a job's end in the same second
    (they decide whether a backfill pass saw the submission while the job still held its GPUs). The log's
    stamps are local wall-clock time: they are aligned on sacct's submissions by the whole quarter-hour
    offset that fits most jobs; a job whose aligned time is not within its sacct second is left out.
    """
    records = json.loads(sacct).get("jobs", [])
    seconds = {
        job["job_id"]: sacct_number(job.get("time", {}).get("submission"))
        for job in records
        if isinstance(job, dict) and isinstance(job.get("job_id"), int)
    }
    stamps = {
        int(job_id): datetime.fromisoformat(stamp).replace(tzinfo=UTC).timestamp()
        for stamp, job_id in _SUBMIT_LINE.findall(log)
    }
    shifts = [sec - stamps[job_id] for job_id, sec in seconds.items() if sec and job_id in stamps]
    if not shifts:
        return {}
    offset = round(statistics.median(shifts) / 900) * 900
    out = {}
    for job_id, stamp in stamps.items():
        second = seconds.get(job_id)
        if second and 0 <= stamp + offset - second < 1:
            out[job_id] = round(stamp + offset, 3)
    return out


def recorded_sacct(text: str, log: str = "") -> dict[str, object]:
    """The part of ``sacct --json`` the comparison reads (name, account, partition, times), small
    enough to keep in the repository so the table can be recomputed without Slurm; with slurmctld's
    ``log``, each job's submission to the millisecond too (``time.submission_log``)."""
    data = json.loads(text)
    keep = ("name", "account", "partition", "nodes")
    submits = log_submit_times(log, text) if log else {}
    jobs = []
    for job in data.get("jobs", []):
        times = {k: job["time"].get(k) for k in ("submission", "start", "end")}
        if job.get("job_id") in submits:
            times["submission_log"] = submits[job["job_id"]]
        jobs.append({**{key: job.get(key) for key in keep}, "time": times})
    return {"jobs": jobs}


def slurm_figures(jobs: Sequence[CalibJob], timings: Mapping[str, Timing], capacity_gpus: int) -> dict[str, object]:
    """Utilisation and waits (seconds) as the simulator defines them.

    Utilisation: GPU-seconds of running jobs between the first and the last submission, over the
    fleet's GPU-seconds in that window (the simulator's accounting window).
    """
    known = [(job, timings[job.name]) for job in jobs if job.name in timings]
    if not known:
        raise ValueError("no job of the list appears in sacct's output")
    origin = min(t.submit for _, t in known)
    close = max(t.submit for _, t in known)
    window = max(close - origin, 1e-9)
    used = sum(job.gpus * max(0.0, min(t.end, close) - max(t.start, origin)) for job, t in known)
    waits = [t.start - t.submit for _, t in known]
    return {
        "jobs": len(known),
        "missing": len(jobs) - len(known),
        "utilisation": used / (capacity_gpus * window),
        "wait_s": summary(waits),
    }


def relative_error(simulated: float | None, measured: float | None) -> float | None:
    """(sim - slurm) / slurm; None when Slurm's figure is zero or missing."""
    if simulated is None or measured is None or measured == 0:
        return None
    return (simulated - measured) / measured


def error_table(slurm: Mapping[str, object], sim: Mapping[str, object]) -> list[dict[str, object]]:
    """Rows ``metric, slurm, simulator, error`` for utilisation and wait mean/p50/p95/p99/max."""
    rows: list[dict[str, object]] = []
    pairs: Iterable[tuple[str, object, object]] = [("utilisation", slurm["utilisation"], sim["utilisation"])]
    slurm_waits, sim_waits = slurm["wait_s"], sim["wait_s"]
    assert isinstance(slurm_waits, Mapping) and isinstance(sim_waits, Mapping)
    pairs = [*pairs, *((f"wait {k} (s)", slurm_waits[k], sim_waits[k]) for k in ("mean", "p50", "p95", "p99", "max"))]
    for metric, measured, simulated in pairs:
        m = float(measured) if isinstance(measured, int | float) else None
        s = float(simulated) if isinstance(simulated, int | float) else None
        rows.append({"metric": metric, "slurm": m, "simulator": s, "error": relative_error(s, m)})
    return rows
