"""``manage.py simulate --mode capacity``: the smallest synthetic fleet meeting a p95 wait target.

Option checks, then ``services.simulation_runs.search_capacity`` (the search itself, its rounds of probes
fanned out over Celery, or run here without a result backend), then the report: the answer, every probe
(capacity, fleet p95, worst team and its p95, met or not) and each team's p95 at the answer, as text or
JSON. The fleet is synthetic ``GPUS_PER_NODE``-GPU nodes, so ``--fleet``, ``--pools`` and ``--capacity`` are
refused: the search varies the number of nodes, which a node list or a pool file fixes.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from django.core.management.base import CommandError

from scheduling.services.simulation_runs import run_replays, search_capacity
from scheduling.simulation.capacity import TARGETS, TargetUnreachable, default_bracket, target_measure, team_p95_waits_h
from scheduling.simulation.fleet import GPUS_PER_NODE

# Options of this mode only: refused in the other modes rather than silently ignored.
OPTIONS = {
    "target": "--target",
    "target_hours": "--target-hours",
    "low": "--low",
    "high": "--high",
    "step": "--step",
    "width": "--width",
    "exact_probes": "--exact-probes",
}
TARGET_WORDS = {
    "fleet": "fleet p95 wait (started jobs)",
    "every-team": "every team's p95 wait (rejected and never-started jobs count as infinite waits)",
}


def refuse_capacity_options(options: Mapping[str, Any]) -> None:
    """In packing or replay mode, name any option that only the capacity search reads."""
    given = [flag for key, flag in OPTIONS.items() if options.get(key) not in (None, False)]
    if given:
        raise CommandError(f"{', '.join(given)} only apply to --mode capacity (not --mode {options['mode']})")


def check_options(options: dict[str, Any]) -> None:
    """Refuse what the search cannot do, naming the option and the rule; fill ``target``, ``step``, ``width``."""
    for key, why in (
        ("fleet", "a node list fixes the fleet's GPUs; the search varies synthetic nodes"),
        ("pools", "a pool file splits a fixed --fleet; the search varies synthetic nodes"),
        ("capacity", "the search chooses the capacity; bound it with --low and --high"),
        ("html_out", "the HTML report draws one replay; run --mode replay --capacity N at the answer"),
    ):
        if options.get(key):
            flag = "--html" if key == "html_out" else f"--{key}"
            raise CommandError(f"--mode capacity does not take {flag}: {why}")
    if not options.get("policy"):
        raise CommandError("--mode capacity needs --policy (the replay policy each probe runs)")
    hours = options.get("target_hours")
    if hours is None:
        raise CommandError("--mode capacity needs --target-hours X (the p95 wait bound, in hours, > 0)")
    if not hours > 0 or math.isinf(hours):
        raise CommandError(f"--target-hours must be a finite number of hours > 0, got {hours:g}")
    options["target"] = options.get("target") or "fleet"
    if options["target"] not in TARGETS:
        raise CommandError(f"--target {options['target']!r}: expected one of {', '.join(TARGETS)}")
    step = GPUS_PER_NODE if options.get("step") is None else options["step"]
    if step <= 0 or step % GPUS_PER_NODE:
        raise CommandError(
            f"--step {step} is not a whole number of {GPUS_PER_NODE}-GPU nodes (the synthetic fleet); "
            f"use a positive multiple of {GPUS_PER_NODE}"
        )
    options["step"] = step
    width = 1 if options.get("width") is None else options["width"]
    if width < 1:
        raise CommandError(f"--width {width}: probes per round must be at least 1")
    options["width"] = width
    for key in ("low", "high"):
        value = options.get(key)
        if value is not None and (value <= 0 or value % step):
            raise CommandError(
                f"--{key} {value} is not a positive multiple of --step {step} GPUs "
                f"(whole {GPUS_PER_NODE}-GPU nodes, probed in steps of {step})"
            )
    if options.get("low") is not None and options.get("high") is not None and options["low"] > options["high"]:
        raise CommandError(f"--low {options['low']} is above --high {options['high']}: need --low <= --high")


def run(trace: Any, options: dict[str, Any], write_progress: Any) -> dict[str, Any]:
    """The search's report as a JSON-ready dict (``error`` set and ``capacity_gpus`` None if unreachable)."""
    step, target, hours = options["step"], options["target"], float(options["target_hours"])
    low, high = default_bracket(trace.jobs, step)
    defaulted = [flag for flag in ("low", "high") if options.get(flag) is None]
    low = low if options.get("low") is None else options["low"]
    high = max(high, low) if options.get("high") is None else options["high"]
    if low > high:  # only --high given, below the default --low
        raise CommandError(
            f"--low {low} (the default: the trace's mean GPU demand) is above --high {high}: need --low <= --high; "
            "give --low too"
        )
    seed = 0 if options.get("seed") is None else options["seed"]
    where = Path(options["trace"])  # a path is resolved here: a Celery worker may run elsewhere on the disk
    spec = {
        "trace": str(where.resolve()) if where.is_file() else options["trace"],
        "policy": options["policy"],
        "seed": seed,
        "on_error": options.get("on_error") or "raise",
    }
    value_of = target_measure(target)
    probes: list[dict[str, Any]] = []
    figures_at: dict[int, dict[str, Any]] = {}

    def on_round(runs: list[tuple[int, dict[str, Any]]]) -> None:
        number = 1 + max((probe["round"] for probe in probes), default=0)
        for capacity, figures in runs:
            figures_at[capacity] = figures
            probes.append(_probe(number, capacity, figures, value_of(figures) <= hours))
            write_progress(f"round {number}: {_probe_line(probes[-1], hours)}")

    started = time.monotonic()
    report: dict[str, Any] = {
        "mode": "capacity", "trace": trace.name, "policy": options["policy"], "seed": seed, "target": target,
        "target_hours": hours, "low_gpus": low, "high_gpus": high, "step_gpus": step, "width": options["width"],
        "gpus_per_node": GPUS_PER_NODE, "bracket_defaulted": [f"--{flag}" for flag in defaulted],
        "early_stop": not options.get("exact_probes"),
    }
    try:
        search = search_capacity(
            spec, low=low, high=high, step=step, target=target, target_hours=hours, width=options["width"],
            ceiling=high, early_stop=not options.get("exact_probes"), on_round=on_round,
        )
    except TargetUnreachable:
        best = _best(probes, target)
        if best["stopped_early"]:  # its figures are those of a partial run: replay it to the end
            figures_at[best["capacity_gpus"]] = run_replays([{**spec, "capacity_gpus": best["capacity_gpus"]}])[0]
            best = {**_probe(best["round"], best["capacity_gpus"], figures_at[best["capacity_gpus"]], False),
                    "replayed_to_the_end": True}
        report.update(
            capacity_gpus=None, largest_failing_gpus=high, met=False, probes=probes, team_p95_wait_hours=None,
            best_probe={**best, "team_p95_wait_hours": _teams(figures_at[best["capacity_gpus"]])},
            error=f"no capacity up to --high {high} GPUs meets the target: {TARGET_WORDS[target]} <= {hours:g} h; "
            f"best probe: {_probe_line(best, hours)}",
        )
    else:
        report.update(
            capacity_gpus=search.capacity_gpus, largest_failing_gpus=search.largest_failing_gpus, met=True,
            probes=probes, team_p95_wait_hours=_teams(figures_at[search.capacity_gpus]), best_probe=None, error=None,
        )
    report["wall_time_s"] = round(time.monotonic() - started, 2)
    return report


def _probe(number: int, capacity: int, figures: Mapping[str, Any], met: bool) -> dict[str, Any]:
    """One probe's row: the fleet p95, the worst team and its p95 (JSON null = infinite), met or not; a probe
    that gave up early (it certainly missed) has no figures to show (``stopped_early``)."""
    stopped = figures.get("stopped_early_s")
    row: dict[str, Any] = {"round": number, "capacity_gpus": capacity, "nodes": capacity // GPUS_PER_NODE,
                           "met": met, "stopped_early": stopped is not None,
                           "stopped_early_hours": None if stopped is None else round(stopped / 3600.0, 3)}
    if stopped is not None:
        return {**row, "fleet_p95_wait_hours": None, "worst_team": None, "worst_team_p95_wait_hours": None}
    teams = team_p95_waits_h(figures)
    worst = max(teams, key=lambda team: teams[team], default=None)
    return {**row, "fleet_p95_wait_hours": _finite(figures["wait_hours"]["all"]["p95"] or 0.0), "worst_team": worst,
            "worst_team_p95_wait_hours": None if worst is None else _finite(teams[worst])}


def _teams(figures: Mapping[str, Any]) -> dict[str, float | None]:
    return {team: _finite(p95) for team, p95 in team_p95_waits_h(figures).items()}


def _best(probes: Sequence[dict[str, Any]], target: str) -> dict[str, Any]:
    """The probe nearest the target: the smallest measured p95 (infinite, or a probe that gave up, last),
    then the largest capacity."""
    column = "fleet_p95_wait_hours" if target == "fleet" else "worst_team_p95_wait_hours"

    def key(probe: dict[str, Any]) -> tuple[float, int]:
        value = probe[column]
        return (math.inf if value is None else float(value), -probe["capacity_gpus"])

    best = min(probes, key=key)
    return dict(best)


def _finite(value: float) -> float | None:
    return None if math.isinf(value) else round(float(value), 3)


def _hours(value: float | None) -> str:
    return "inf" if value is None else f"{value:.2f}"


def _probe_line(probe: Mapping[str, Any], hours: float) -> str:
    verdict = "met" if probe["met"] else "missed"
    if probe["stopped_early"]:
        return (f"{probe['capacity_gpus']} GPUs {verdict} (gave up at {probe['stopped_early_hours']:g} h "
                f"simulated: the p95 was certainly above {hours:g} h)")
    return (f"{probe['capacity_gpus']} GPUs {verdict}: fleet p95 {_hours(probe['fleet_p95_wait_hours'])} h, "
            f"worst team {probe['worst_team']} {_hours(probe['worst_team_p95_wait_hours'])} h")


def as_text(report: Mapping[str, Any]) -> str:
    """The report for a reader: the answer, the probes in order, each team's p95 at the answer."""
    hours = report["target_hours"]
    defaulted = f" ({', '.join(report['bracket_defaulted'])} from the trace)" if report["bracket_defaulted"] else ""
    lines = [
        f"Capacity search on {report['trace']}, policy {report['policy']}, seed {report['seed']}",
        f"target: {TARGET_WORDS[report['target']]} <= {hours:g} h",
        f"synthetic {report['gpus_per_node']}-GPU nodes, {report['low_gpus']}-{report['high_gpus']} GPUs{defaulted}, "
        f"step {report['step_gpus']}, {report['width']} probe(s) per round",
        "",
    ]
    if report["met"]:
        below = report["largest_failing_gpus"]
        lines.append(
            f"answer: {report['capacity_gpus']} GPUs ({_nodes(report['capacity_gpus'] // report['gpus_per_node'])}); "
            + (f"{below} GPUs misses the target" if below else "even one step meets it")
        )
    else:
        lines.append(f"not met: {report['error']}")
    lines += ["", "round   GPUs  fleet p95 h  worst team            its p95 h  target"]
    for probe in report["probes"]:
        if probe["stopped_early"]:
            figures = f"{'-':>11}  {'-':<20}  {'-':>9}"
            verdict = f"missed (gave up at {probe['stopped_early_hours']:g} h simulated)"
        else:
            figures = (f"{_hours(probe['fleet_p95_wait_hours']):>11}  {probe['worst_team']!s:<20}  "
                       f"{_hours(probe['worst_team_p95_wait_hours']):>9}")
            verdict = "met" if probe["met"] else "missed"
        lines.append(f"{probe['round']:>5}  {probe['capacity_gpus']:>5}  {figures}  {verdict}")
    teams, where = report["team_p95_wait_hours"], f"the answer, {report['capacity_gpus']} GPUs"
    if teams is None:
        best = report["best_probe"]
        teams, where = best["team_p95_wait_hours"], f"the best probe, {best['capacity_gpus']} GPUs"
        if best.get("replayed_to_the_end"):
            where += " (replayed to the end: the probe had given up)"
    lines += ["", f"p95 wait per team at {where} (inf: rejected or never-started jobs at the p95):"]
    width = max((len(team) for team in teams), default=4)
    lines += [f"  {team:<{width}}  {_hours(p95):>8} h" for team, p95 in teams.items()]
    if any(probe["stopped_early"] for probe in report["probes"]):
        lines += ["", "a probe that gave up stopped once its p95 was certainly above the target "
                  "(same answer; --exact-probes runs every probe to the end)"]
    return "\n".join(lines) + "\n"


def _nodes(count: int) -> str:
    return f"{count} node" if count == 1 else f"{count} nodes"
