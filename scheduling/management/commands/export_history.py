"""``manage.py export_history --weeks N --out FILE``: the portal's recorded work as the simulator's generic CSV.

Replay it with ``manage.py simulate --trace FILE --mode replay --policy federated``. Times are seconds from
the start of the window (printed); what could not be exported is counted by reason on stderr.
"""

from __future__ import annotations

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from scheduling.selectors.planning import history_trace_jobs
from scheduling.traces.generic import write_generic_csv


class Command(BaseCommand):
    help = "Export the last N weeks of recorded workloads to the simulator's generic CSV format."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--weeks", type=int, default=4, help="weeks of history before --until (default 4)")
        parser.add_argument("--out", required=True, help="CSV file to write")
        parser.add_argument("--until", default="", help="end of the window, ISO 8601 (default: now)")

    def handle(self, *args, **options) -> None:
        if options["weeks"] < 1:
            raise CommandError(f"--weeks must be at least 1, got {options['weeks']}")
        until = parse_datetime(options["until"]) if options["until"] else timezone.now()
        if until is None:
            raise CommandError(f"--until must be an ISO 8601 date-time, got {options['until']!r}")
        if timezone.is_naive(until):
            until = timezone.make_aware(until)
        export = history_trace_jobs(until, options["weeks"])
        out = Path(options["out"])
        if not out.parent.is_dir():
            raise CommandError(f"--out: directory {out.parent} does not exist")
        rows = write_generic_csv(out, export.jobs)
        self.stdout.write(f"{rows} jobs from {export.epoch.isoformat()} to {export.until.isoformat()} -> {out}")
        for reason, count in sorted(export.skipped.items()):
            self.stderr.write(f"left out {count}: {reason}")
