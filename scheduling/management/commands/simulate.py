"""``manage.py simulate``: replay or pack a trace under a policy, or search the capacity a wait target
needs (``--mode capacity``, management/capacity_search.py); needs no database.

Thin on purpose: argument parsing, a tqdm bar and file output; the work is in scheduling.simulation (and,
for the capacity search, services.simulation_runs).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from tqdm import tqdm

from scheduling.management import capacity_search
from scheduling.simulation import MODES, POLICY_NAMES, simulate_packing, simulate_replay
from scheduling.simulation.capacity import TARGETS
from scheduling.simulation.fleet import GPUS_PER_NODE
from scheduling.simulation.progress import ProgressCallback
from scheduling.simulation.runner import simulate_pool_file
from scheduling.traces import TraceFormatError, UnknownTrace, load_trace

BAR_AFTER_S = 3.0  # no progress bar for runs that end before a bar would help
COMMAND_MODES = (*MODES, "capacity")


class Command(BaseCommand):
    help = (
        "Simulate a trace (packing or replay) under a policy and print or write the figures as JSON; or search "
        "the smallest fleet meeting a p95 wait target (--mode capacity)."
    )
    requires_system_checks: list[str] = []
    requires_migrations_checks = False

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--trace", required=True, help="philly, philly-demo, openb-default, ... or a CSV path")
        parser.add_argument(
            "--mode", choices=COMMAND_MODES, required=True,
            help="capacity: the smallest synthetic fleet whose p95 wait meets --target-hours (docs/simulator.md)",
        )
        parser.add_argument("--policy", choices=POLICY_NAMES, default=None, help="required unless --pools is given")
        parser.add_argument("--seed", type=int, default=None, help="default: 42 for packing, 0 for replay")
        parser.add_argument(
            "--capacity",
            type=int,
            default=None,
            help=f"fleet GPUs for replay on synthetic {GPUS_PER_NODE}-GPU nodes; must be a multiple of "
            f"{GPUS_PER_NODE} (default: 2x mean demand); not with --fleet",
        )
        parser.add_argument(
            "--fleet",
            default=None,
            help="node list: a CSV with name,gpus,gpu_model[,cpu_milli,memory_mib,leaf_switch,nvlink_domain] "
            "or an openb node list (any file name)",
        )
        parser.add_argument(
            "--on-error",
            dest="on_error",
            choices=("raise", "skip"),
            default="raise",
            help="skip: leave out malformed rows (and jobs no pool takes), counted per reason in the JSON",
        )
        parser.add_argument(
            "--pools",
            default=None,
            help="replay on partitions described in a TOML file ([[pool]] tables: nodes, teams/kinds, queue, "
            "backfill, backfill_depth, nodes_shared, preemption); needs --fleet; replaces --policy",
        )
        parser.add_argument(
            "--json", dest="json_out", nargs="?", const="-", default=None,
            help="write the figures to this file (bare --json: to stdout; --mode capacity prints text otherwise)",
        )
        parser.add_argument("--html", dest="html_out", default=None, help="write a self-contained Plotly report")
        capacity = parser.add_argument_group("--mode capacity (synthetic fleet; not with --fleet, --pools, --capacity)")
        capacity.add_argument(
            "--target", choices=TARGETS, default=None,
            help="fleet: p95 wait of all started jobs (default); every-team: each team's p95, its rejected and "
            "never-started jobs counted as infinite waits",
        )
        capacity.add_argument("--target-hours", dest="target_hours", type=float, default=None,
                              help="the p95 wait bound in hours (required, > 0)")
        capacity.add_argument(
            "--low", type=int, default=None,
            help="GPUs the search starts from (a multiple of --step; default: the trace's mean GPU demand); "
            "the search goes below it if it already meets the target",
        )
        capacity.add_argument(
            "--high", type=int, default=None,
            help="most GPUs probed (a multiple of --step; default: 8x the mean demand, at least the largest job)",
        )
        capacity.add_argument(
            "--step", type=int, default=None,
            help=f"resolution in GPUs, a multiple of {GPUS_PER_NODE} (default {GPUS_PER_NODE}: one node)",
        )
        capacity.add_argument("--width", type=int, default=None,
                              help="probes per round, fanned out over Celery workers when a result backend is set "
                              "(default 1: plain bisection)")
        capacity.add_argument("--exact-probes", dest="exact_probes", action="store_true",
                              help="run every probe to the end (default: a probe gives up once it certainly misses)")

    def handle(self, *args: Any, **options: Any) -> None:
        if options["mode"] == "capacity":
            self._capacity(options)
            return
        capacity_search.refuse_capacity_options(options)
        _check_capacity(options)
        _check_policy(options)
        trace = _load(options)
        with _Bar() as bar:
            try:
                figures = self._run(trace, options, bar)
            except (ValueError, FileNotFoundError) as error:  # impossible fleets or pools: a message, no traceback
                raise CommandError(str(error)) from error
        figures["fleet"] = _fleet_figures(trace, options)
        figures["trace_reports"] = [report.as_dict() for report in trace.reports]
        figures["skipped"] = _skipped(trace, figures)
        self._write_json(figures, options)
        if options["html_out"]:
            from scheduling.simulation.html_report import write_html_report  # loads plotly: only when asked for

            write_html_report(figures, options["html_out"])
        self.stderr.write(f"{options['mode']} {options['policy']} on {trace.name}: {figures['wall_time_s']:.1f} s")

    def _capacity(self, options: dict[str, Any]) -> None:
        capacity_search.check_options(options)
        trace = _load(options)
        try:
            report = capacity_search.run(trace, options, self.stderr.write)
        except (ValueError, FileNotFoundError) as error:  # e.g. a siloed split too small for its partitions
            raise CommandError(f"capacity search: {error}") from error
        report["fleet"] = {"source": f"synthetic {GPUS_PER_NODE}-GPU nodes"}
        report["trace_reports"] = [trace_report.as_dict() for trace_report in trace.reports]
        report["skipped"] = _skipped(trace, report)
        if options["json_out"]:
            self._write_json(report, options)
        if options["json_out"] != "-":
            self.stdout.write(capacity_search.as_text(report), ending="")
        if report["error"]:
            raise CommandError(report["error"])

    def _write_json(self, figures: dict[str, Any], options: dict[str, Any]) -> None:
        text = json.dumps(figures, indent=2, default=str)
        if options["json_out"] and options["json_out"] != "-":
            Path(options["json_out"]).write_text(text, encoding="utf-8")
        else:
            self.stdout.write(text)

    @staticmethod
    def _run(trace: Any, options: dict[str, Any], progress: ProgressCallback) -> dict[str, Any]:
        if options.get("pools"):
            seed = 0 if options["seed"] is None else options["seed"]
            skip = options.get("on_error") == "skip"
            return simulate_pool_file(
                trace, options["pools"], seed=seed, skip_unrouted=skip, progress=progress
            ).as_dict()
        if options["mode"] == "packing":
            seed = 42 if options["seed"] is None else options["seed"]
            result = simulate_packing(trace, options["policy"], seed=seed, progress=progress).as_dict()
            result["trace"] = trace.name
            return result
        seed = 0 if options["seed"] is None else options["seed"]
        return simulate_replay(
            trace, options["policy"], seed=seed, capacity_gpus=options["capacity"], progress=progress
        ).as_dict()


def _load(options: dict[str, Any]) -> Any:
    try:
        return load_trace(options["trace"], fleet=options.get("fleet"), on_error=options.get("on_error", "raise"))
    except (UnknownTrace, FileNotFoundError, TraceFormatError) as error:
        raise CommandError(str(error)) from error


def _skipped(trace: Any, figures: dict[str, Any]) -> dict[str, int]:
    """Rows and jobs left out, per reason, over every file read (``--on-error skip``)."""
    reasons: dict[str, int] = {}
    for report in trace.reports:
        for reason, count in report.skipped.items():
            reasons[reason] = reasons.get(reason, 0) + count
    no_pool = figures.get("jobs", {}).get("skipped_no_pool", 0) if isinstance(figures.get("jobs"), dict) else 0
    if no_pool:
        reasons["no pool takes the job"] = no_pool
    return reasons


def _check_policy(options: dict[str, Any]) -> None:
    if options.get("pools"):
        if options.get("policy"):
            raise CommandError("--pools holds the queue and placement rules; drop --policy")
        if options["mode"] != "replay":
            raise CommandError("--pools describes partitions for --mode replay; packing takes --policy")
        if options.get("capacity"):
            raise CommandError("--pools selects nodes of a --fleet; --capacity does not apply")
        options["policy"] = "pools"
    elif not options.get("policy"):
        raise CommandError(f"--policy is required (one of {', '.join(POLICY_NAMES)}) unless --pools is given")


def _check_capacity(options: dict[str, Any]) -> None:
    capacity = options.get("capacity")
    if capacity is None:
        return
    if options.get("fleet"):
        raise CommandError("--capacity and --fleet exclude each other: the node list fixes the fleet's GPUs")
    if capacity <= 0 or capacity % GPUS_PER_NODE:
        low = capacity // GPUS_PER_NODE * GPUS_PER_NODE
        raise CommandError(
            f"--capacity {capacity} is not a whole number of {GPUS_PER_NODE}-GPU nodes (the synthetic fleet); "
            f"use {low or GPUS_PER_NODE} or {low + GPUS_PER_NODE}, or describe the nodes with --fleet FILE.csv"
        )


def _fleet_figures(trace: Any, options: dict[str, Any]) -> dict[str, Any]:
    """Where the simulated nodes came from, so a reader of the JSON knows what was simulated."""
    if options.get("fleet"):
        source = options["fleet"]
    elif trace.nodes and not options.get("capacity"):
        source = "trace node list"
    else:
        source = f"synthetic {GPUS_PER_NODE}-GPU nodes"
    return {"source": str(source)}


class _Bar:
    """A tqdm bar that appears only once a run has taken more than ``BAR_AFTER_S`` seconds."""

    def __init__(self) -> None:
        self.started = time.monotonic()
        self.bar: Any = None

    def __enter__(self) -> _Bar:
        return self

    def __call__(self, done: int, total: int) -> None:
        if self.bar is None:
            if time.monotonic() - self.started < BAR_AFTER_S:
                return
            self.bar = tqdm(total=total, unit="event", leave=False, disable=None)  # None: no bar off a terminal
        self.bar.n = done
        self.bar.refresh()

    def __exit__(self, *exc: object) -> None:
        if self.bar is not None:
            self.bar.close()
