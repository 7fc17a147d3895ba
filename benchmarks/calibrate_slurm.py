"""Calibrate the simulator against a real Slurm run (issue 21); prints the error table as JSON.

    .venv/bin/python benchmarks/calibrate_slurm.py          # the table from the recorded runs, no Slurm
    sudo .venv/bin/python benchmarks/calibrate_slurm.py --layout partitioned|pooled \
        [--start-hours 0] [--jobs 520] [--factor 180] [--max-duration 120] [--nodes 10] [--groups 3] [--out DIR] \
        [--port-base N] [--debug-flags Backfill] [--topology one-leaf|fixture]

A live run takes a window of the Philly week shipped in scheduling/demo_data, compresses time by
``--factor`` (180: one real minute is three trace hours, so Slurm's whole-minute limits stay
meaningful), caps run times at ``--max-duration`` compressed seconds, starts the project's Slurm
fixture (scripts/slurm/start.sh, own state dir, ports 27017-27500 by layout or from --port-base) with
the layout's partitions and every node on one leaf switch (as the simulator's fleet),
submits each job with sbatch at its compressed submit time (``sleep <duration>``, ``--time=<limit>``),
reads submit/start/end back from ``sacct --json``, replays the same list (Slurm's submit times, the
planned durations and limits) in the simulator on the same fleet and pools, and compares. It writes
``<layout>.json`` (arguments + trimmed sacct, with each job's node) and slurmctld's log to --out: copy
the JSON to benchmarks/data/calibrate_slurm/ to publish it. Needs root and Slurm (scripts/slurm/install.sh).
Slurm's scheduler settings for the run come from $CALIB_SCHEDULER_PARAMETERS (default below).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from scheduling.collectors.hostlist import expand_hostlist  # noqa: E402
from scheduling.simulation import calibration as cal  # noqa: E402
from scheduling.simulation.runner import simulate_pool_file  # noqa: E402
from scheduling.traces.generic import read_generic_csv  # noqa: E402
from scheduling.traces.nodes import read_fleet_csv  # noqa: E402
from scheduling.traces.philly import read_philly  # noqa: E402
from scheduling.traces.records import Trace  # noqa: E402

PHILLY = ROOT / "scheduling" / "demo_data" / "philly_slice.csv"
# bf_resolution=1: backfill plans in seconds, not Slurm's default minute (the run is compressed).
SCHEDULER_PARAMETERS = os.environ.get(
    "CALIB_SCHEDULER_PARAMETERS", "bf_interval=1,bf_resolution=1,bf_max_job_test=2000,bf_continue"
)
BACKFILL_DEPTH = 2000
# The head's reservation in the simulator's pools: Slurm 22.05's will-run batches (the fixture's Slurm,
# docs/simulator.md section 4); the report also gives the engine's earliest fit ("table_earliest").
RESERVATION = "slurm-22.05"
# Recorded Slurm runs (the trimmed sacct output and the arguments that made the job list).
RECORDED = ROOT / "benchmarks" / "data" / "calibrate_slurm"
RUN_ARGUMENTS = ("start_hours", "jobs", "factor", "max_duration", "nodes", "groups", "topology")
# Per --tag (default: the layout): slurmctld port (slurmdbd = +2), slurmrestd port, slurmd port base,
# apart from CI's fixtures so both layouts (and the smoke test) can run at once.
PORTS = {"partitioned": (27017, 27020, 27100), "pooled": (27217, 27220, 27300), "smoke": (27417, 27420, 27500)}


def layout_partitions(jobs: list[cal.CalibJob], layout: str, nodes: int, groups: int) -> list[cal.Partition]:
    teams = cal.split_teams(jobs, groups)
    if layout == "pooled":
        return cal.partitions([tuple(sorted(t for group in teams for t in group))], [nodes])
    return cal.partitions(teams, cal.node_shares(jobs, teams, nodes))


def start_fixture(tag: str, nodes: int, teams: list[str], state: Path, port_base: int | None) -> dict[str, str]:
    ctld, rest, base = PORTS[tag] if port_base is None else (port_base + 17, port_base + 20, port_base + 100)
    env = {
        **os.environ,
        "SLURM_STATE_DIR": str(state),
        "SLURM_NODES": str(nodes),
        "SLURMCTLD_PORT": str(ctld),
        "SLURMRESTD_PORT": str(rest),
        "SLURMD_PORT_BASE": str(base),
        "SLURM_ACCOUNTS": " ".join(teams),
        "SLURM_ACCT_DB": f"gp_calib_{tag}" if port_base is None else f"gp_calib_{tag}_{port_base}",
    }
    out = subprocess.run(
        [str(ROOT / "scripts/slurm/start.sh")], env=env, check=True, capture_output=True, text=True
    ).stdout
    return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)


def configure(
    conf: Path, parts: list[cal.Partition], bin_dir: str, env: dict[str, str], debug_flags: str, one_leaf: bool
) -> None:
    """The run's partitions and scheduler settings, then ``scontrol reconfigure``.

    FIFO like the simulator's queue: priority by age only (fair share weight 0).
    """
    text = conf.read_text()
    text = re.sub(r"(?m)^PartitionName=.*\n", "", text)
    text = re.sub(r"(?m)^SchedulerParameters=.*$", f"SchedulerParameters={SCHEDULER_PARAMETERS}", text)
    text = re.sub(r"(?m)^PriorityWeightFairshare=.*$", "PriorityWeightFairshare=0", text)
    text = re.sub(r"(?m)^PriorityWeightAge=.*$", "PriorityWeightAge=100000\nPriorityMaxAge=01:00:00", text)
    text += "\n".join(cal.slurm_partition_lines(parts, exclusive=False)) + "\n"
    if debug_flags:  # e.g. Backfill: slurmctld.log (kept in --out) then shows each reservation
        text += f"DebugFlags={debug_flags}\n"
    conf.write_text(text)
    if one_leaf:
        # The simulator's fleet has every node on one leaf switch; the fixture's two leaves (dgx01-05,
        # dgx06-10) split a partition such as dgx[05-06] over two switches, which Slurm's topology/tree
        # planning treats differently. Same topology on both sides.
        nodes = sorted({name for part in parts for name in expand_hostlist(part.hostlist)})
        (conf.parent / "topology.conf").write_text(f"SwitchName=leaf1 Nodes={','.join(nodes)}\n")
    subprocess.run([f"{bin_dir}/scontrol", "reconfigure"], env=env, check=True)
    time.sleep(2)


def submit_all(jobs: list[cal.CalibJob], parts: list[cal.Partition], bin_dir: str, env: dict[str, str]) -> None:
    """sbatch each job at its compressed submit time (a submitter loop: --begin has whole-second steps)."""
    partition_of = {team: part.name for part in parts for team in part.teams}
    began = time.monotonic()
    for job in jobs:
        delay = job.submit_s - (time.monotonic() - began)
        if delay > 0:
            time.sleep(delay)
        gres = f"--gres=gpu:{job.gpus_per_member}"
        subprocess.run(
            [
                f"{bin_dir}/sbatch",
                "-Q",
                f"--job-name={job.name}",
                f"--account={job.team}",
                f"--partition={partition_of[job.team]}",
                f"--nodes={job.members}",
                "--ntasks-per-node=1",
                gres,
                f"--time={job.limit_min}",
                "--output=/dev/null",
                f"--wrap=sleep {job.duration_s:.3f}",
            ],
            env=env,
            check=True,
        )


def wait_drained(bin_dir: str, env: dict[str, str], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        out = subprocess.run([f"{bin_dir}/squeue", "-h", "-o", "%i"], env=env, capture_output=True, text=True).stdout
        if not out.strip():
            return
        time.sleep(2)
    raise TimeoutError("jobs still queued or running after the timeout")


def sacct_json(bin_dir: str, env: dict[str, str]) -> str:
    # slurmdbd receives job records asynchronously: give the last ones a moment.
    time.sleep(5)
    return subprocess.run(
        [f"{bin_dir}/sacct", "--json", "-X", "-a", "-S", "now-2days", "-E", "now+1day"],
        env=env,
        check=True,
        capture_output=True,
        text=True,
    ).stdout


def run_slurm(
    jobs: list[cal.CalibJob], parts: list[cal.Partition], args: argparse.Namespace, tag: str, out: Path
) -> str:
    state = Path(f"/tmp/gp-calib-{tag}" if args.port_base is None else f"/tmp/gp-calib-{tag}-{args.port_base}")
    teams = sorted({job.team for job in jobs})
    fixture = start_fixture(tag, args.nodes, teams, state, args.port_base)
    env = {**os.environ, "SLURM_CONF": fixture["SLURM_CONF"]}
    bin_dir = fixture["SLURM_BIN_DIR"]
    try:
        configure(Path(fixture["SLURM_CONF"]), parts, bin_dir, env, args.debug_flags, args.topology == "one-leaf")
        submit_all(jobs, parts, bin_dir, env)
        wait_drained(bin_dir, env, timeout_s=3600)
        text = sacct_json(bin_dir, env)
    finally:
        log = state / "log" / "slurmctld.log"
        if log.exists():
            (out / f"slurmctld-{tag}.log").write_bytes(log.read_bytes())
        subprocess.run(
            [str(ROOT / "scripts/slurm/stop.sh")],
            env={**os.environ, "SLURM_STATE_DIR": str(state)},
            check=False,
            capture_output=True,
        )
    (out / f"sacct-{tag}.json").write_text(text)
    return text


def simulate(
    jobs: list[cal.CalibJob],
    parts: list[cal.Partition],
    timings: dict[str, cal.Timing],
    nodes: int,
    out: Path,
    layout: str,
    reservation: str = RESERVATION,
) -> dict[str, object]:
    """Replay with Slurm's recorded submit times (so submitter lag is not counted as model error): to the
    millisecond from slurmctld's log where the run kept them, else sacct's whole seconds."""
    origin = min(t.replay_submit for t in timings.values())
    submits = {name: t.replay_submit - origin for name, t in timings.items()}
    csv_path, fleet_path, pools_path = (
        out / f"{layout}-{n}" for n in ("jobs.csv", "fleet.csv", f"pools-{reservation}.toml")
    )
    csv_path.write_text(cal.generic_csv([j for j in jobs if j.name in timings], submits))
    fleet_path.write_text(cal.fleet_csv(nodes))
    pools_path.write_text(
        cal.pools_toml(parts, exclusive=False, backfill_depth=BACKFILL_DEPTH, reservation=reservation)
    )
    trace = read_generic_csv(csv_path)
    fleet, _ = read_fleet_csv(fleet_path)
    result = simulate_pool_file(Trace(name=trace.name, jobs=trace.jobs, nodes=fleet), pools_path)
    waits = result.figures["wait_hours"]
    assert isinstance(waits, dict)
    hours = waits["all"]
    return {
        "utilisation": result.figures["utilisation"],
        "wait_s": {k: (v * 3600 if isinstance(v, float) else v) for k, v in hours.items()},
    }


def compare(args: argparse.Namespace, layout: str, sacct: str, out: Path) -> dict[str, object]:
    trace = read_philly(PHILLY)
    start_s = args.start_hours * 3600
    jobs = cal.compress(
        trace.jobs, start_s=start_s, count=args.jobs, factor=args.factor, max_duration_s=args.max_duration
    )
    parts = layout_partitions(jobs, layout, args.nodes, args.groups)
    if not sacct:
        sacct = run_slurm(jobs, parts, args, args.tag or layout, out)
        log_path = out / f"slurmctld-{args.tag or layout}.log"
        log = log_path.read_text(errors="replace") if log_path.exists() else ""
        record = {"arguments": {k: getattr(args, k) for k in RUN_ARGUMENTS}, **cal.recorded_sacct(sacct, log)}
        sacct = json.dumps(record)
        (out / f"{layout}.json").write_text(json.dumps(record, indent=0) + "\n")
    timings = cal.parse_sacct_json(sacct)
    slurm = cal.slurm_figures(jobs, timings, args.nodes * 8)
    sim = simulate(jobs, parts, timings, args.nodes, out, layout)
    earliest = simulate(jobs, parts, timings, args.nodes, out, layout, reservation="earliest")
    return {
        "benchmark": "calibrate_slurm",
        "layout": layout,
        **{k: getattr(args, k) for k in RUN_ARGUMENTS},
        "partitions": [vars(p) for p in parts],
        "scheduler_parameters": SCHEDULER_PARAMETERS,
        "reservation": RESERVATION,
        "slurm": slurm,
        "simulator": sim,
        "table": cal.error_table(slurm, sim),
        "table_earliest": cal.error_table(slurm, earliest),
    }


def recorded_runs(args: argparse.Namespace) -> None:
    """Without --layout (``make bench``): the table again from the recorded Slurm runs, no Slurm needed."""
    for path in sorted(RECORDED.glob("*.json")):
        record = json.loads(path.read_text())
        replayed = argparse.Namespace(**{**vars(args), **record["arguments"]})
        with tempfile.TemporaryDirectory() as scratch:
            print(json.dumps(compare(replayed, path.stem, json.dumps(record), Path(scratch))), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--start-hours", type=float, default=0.0, help="window start, hours into the Philly week")
    parser.add_argument("--jobs", type=int, default=520)
    parser.add_argument("--factor", type=float, default=180.0)
    parser.add_argument("--max-duration", type=float, default=120.0, help="cap on run times, compressed seconds")
    parser.add_argument("--nodes", type=int, default=10, help="8-GPU nodes of the fixture")
    parser.add_argument("--groups", type=int, default=3, help="partitions of the partitioned layout")
    parser.add_argument("--layout", choices=("partitioned", "pooled"), help="run Slurm (default: recorded runs)")
    parser.add_argument("--tag", choices=sorted(PORTS), default=None, help="ports and state dir (default: layout)")
    parser.add_argument("--port-base", type=int, default=None, help="ports BASE+17/+19/+20, slurmd BASE+101..")
    parser.add_argument("--debug-flags", default="", help="slurm.conf DebugFlags for the run, e.g. Backfill")
    parser.add_argument(
        "--topology",
        choices=("one-leaf", "fixture"),
        default="one-leaf",
        help="Slurm's topology.conf: every node on one leaf switch, as the simulator's fleet (default), or the "
        "fixture's two leaves",
    )
    parser.add_argument("--out", type=Path, default=None, help="where the job list, pools and Slurm record go")
    args = parser.parse_args()
    if not args.layout:
        recorded_runs(args)
        return
    out = args.out or Path(tempfile.mkdtemp(prefix="calib-"))
    out.mkdir(parents=True, exist_ok=True)
    report = compare(args, args.layout, "", out)
    (out / f"report-{args.layout}.json").write_text(json.dumps(report, indent=1))
    print(json.dumps(report))


if __name__ == "__main__":
    main()
