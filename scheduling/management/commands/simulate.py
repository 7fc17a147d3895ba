"""``manage.py simulate``: replay or pack a trace under a policy; needs no database.

Thin on purpose: argument parsing, a tqdm bar and file output; the work is in scheduling.simulation.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from scheduling.simulation import MODES, POLICY_NAMES, simulate_packing, simulate_replay
from scheduling.simulation.progress import ProgressCallback
from scheduling.traces import TraceFormatError, UnknownTrace, load_trace

BAR_AFTER_S = 3.0  # no progress bar for runs that end before a bar would help


class Command(BaseCommand):
    help = "Simulate a trace (packing or replay) under a policy and print or write the figures as JSON."
    requires_system_checks: list[str] = []
    requires_migrations_checks = False

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--trace", required=True, help="philly, philly-demo, openb-default, ... or a CSV path")
        parser.add_argument("--mode", choices=MODES, required=True)
        parser.add_argument("--policy", choices=POLICY_NAMES, required=True)
        parser.add_argument("--seed", type=int, default=None, help="default: 42 for packing, 0 for replay")
        parser.add_argument(
            "--capacity", type=int, default=None, help="fleet GPUs for replay (default: 2x mean demand)"
        )
        parser.add_argument("--json", dest="json_out", default=None, help="write the figures to this file")
        parser.add_argument("--html", dest="html_out", default=None, help="write a self-contained Plotly report")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            trace = load_trace(options["trace"])
        except (UnknownTrace, FileNotFoundError, TraceFormatError) as error:
            raise CommandError(str(error)) from error
        with _Bar() as bar:
            figures = self._run(trace, options, bar)
        figures["trace_reports"] = [report.as_dict() for report in trace.reports]
        text = json.dumps(figures, indent=2, default=str)
        if options["json_out"]:
            Path(options["json_out"]).write_text(text, encoding="utf-8")
        else:
            self.stdout.write(text)
        if options["html_out"]:
            from scheduling.simulation.html_report import write_html_report

            write_html_report(figures, options["html_out"])
        self.stderr.write(f"{options['mode']} {options['policy']} on {trace.name}: {figures['wall_time_s']:.1f} s")

    @staticmethod
    def _run(trace: Any, options: dict[str, Any], progress: ProgressCallback) -> dict[str, Any]:
        if options["mode"] == "packing":
            seed = 42 if options["seed"] is None else options["seed"]
            result = simulate_packing(trace, options["policy"], seed=seed, progress=progress).as_dict()
            result["trace"] = trace.name
            return result
        seed = 0 if options["seed"] is None else options["seed"]
        return simulate_replay(
            trace, options["policy"], seed=seed, capacity_gpus=options["capacity"], progress=progress
        ).as_dict()


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
            from tqdm import tqdm

            self.bar = tqdm(total=total, unit="event", leave=False)
        self.bar.n = done
        self.bar.refresh()

    def __exit__(self, *exc: object) -> None:
        if self.bar is not None:
            self.bar.close()
