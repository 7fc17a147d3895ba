"""``manage.py import_slurm``: a Slurm site's history and layout as simulator inputs; needs no database.

* ``--sacct FILE --jobs-out jobs.csv``: ``sacct -P`` or ``sacct --json`` output to the generic CSV (time limits kept).
* ``--conf slurm.conf --fleet-out fleet.csv --pools-out pools.toml``: NodeName / PartitionName lines to a
  ``--fleet`` CSV and a ``--pools`` TOML for ``manage.py simulate``.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from scheduling.traces.errors import TraceFormatError
from scheduling.traces.generic import write_generic_csv
from scheduling.traces.slurm import SlurmConf, read_sacct, read_slurm_conf
from scheduling.wording import plural


class Command(BaseCommand):
    help = "Convert sacct -P output and slurm.conf into the simulator's job CSV, fleet CSV and pools TOML."
    requires_system_checks: list[str] = []
    requires_migrations_checks = False

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--sacct",
            default=None,
            help="sacct -P (JobID,Submit,Start,End,Timelimit,AllocTRES,NNodes,...) or sacct --json output",
        )
        parser.add_argument("--jobs-out", dest="jobs_out", default=None, help="generic CSV to write")
        parser.add_argument("--conf", default=None, help="slurm.conf")
        parser.add_argument("--fleet-out", dest="fleet_out", default=None, help="fleet CSV to write")
        parser.add_argument("--pools-out", dest="pools_out", default=None, help="pools TOML to write")
        parser.add_argument("--on-error", dest="on_error", choices=("raise", "skip"), default="raise")

    def handle(self, *args: Any, **options: Any) -> None:
        if not options["sacct"] and not options["conf"]:
            raise CommandError("give --sacct FILE (with --jobs-out) and/or --conf slurm.conf (with --fleet-out)")
        try:
            if options["sacct"]:
                self._jobs(options)
            if options["conf"]:
                self._layout(options)
        except (TraceFormatError, FileNotFoundError) as error:
            raise CommandError(str(error)) from error

    def _jobs(self, options: dict[str, Any]) -> None:
        if not options["jobs_out"]:
            raise CommandError("--sacct needs --jobs-out FILE.csv")
        trace = read_sacct(options["sacct"], on_error=options["on_error"])
        rows = write_generic_csv(options["jobs_out"], trace.jobs)
        report = trace.reports[0]
        skipped = ", ".join(f"{count} {reason}" for reason, count in report.skipped.items()) or "none"
        self.stdout.write(f"{options['jobs_out']}: {rows} jobs (skipped: {skipped})")

    def _layout(self, options: dict[str, Any]) -> None:
        if not options["fleet_out"]:
            raise CommandError("--conf needs --fleet-out FILE.csv (and optionally --pools-out FILE.toml)")
        conf = read_slurm_conf(options["conf"])
        with Path(options["fleet_out"]).open("w", newline="", encoding="utf-8") as handle:
            writer = csv.writer(handle)
            writer.writerow(("name", "gpus", "gpu_model", "cpu_milli", "memory_mib"))
            writer.writerows(
                (node.name, node.gpu_total, node.gpu_model, node.cpu_milli_total, node.memory_mib_total)
                for node in conf.nodes
            )
        self.stdout.write(f"{options['fleet_out']}: {len(conf.nodes)} nodes")
        if options["pools_out"]:
            Path(options["pools_out"]).write_text(pools_toml(conf, options["conf"]), encoding="utf-8")
            self.stdout.write(f"{options['pools_out']}: {len(conf.partitions)} partitions")


def pools_toml(conf: SlurmConf, source: str) -> str:
    """One ``[[pool]]`` per partition. Pools cannot share nodes, so a partition gets only the nodes no
    earlier one took (default partition first). Jobs are routed by account: a partition with
    ``AllowAccounts`` takes those accounts; otherwise the default partition takes every job and the others
    take the teams listed (to edit: the accounts that use them)."""
    ordered = sorted(conf.partitions, key=lambda p: (not p.default, p.line))
    blocks: list[tuple[bool, list[str]]] = []
    taken: set[str] = set()
    exclusive = conf.settings.get("SelectType") == "select/linear"
    for partition in ordered:
        free = [name for name in partition.nodes if name not in taken]
        if not free:
            blocks.append((False, [f"# partition {partition.name}: every node is in an earlier pool; left out", ""]))
            continue
        taken.update(free)
        block = ["[[pool]]", f'name = "{partition.name}"', f'nodes = "{",".join(free)}"']
        if len(free) != len(partition.nodes):
            earlier = len(partition.nodes) - len(free)
            block.append(f"# Slurm also gave it {plural(earlier, 'node')} of an earlier partition")
        if partition.accounts:
            block.append(f"teams = [{', '.join(json.dumps(a) for a in partition.accounts)}]  # AllowAccounts")
        elif not partition.default:
            block.append(f'teams = ["{partition.name}"]  # edit: the accounts whose jobs run here')
        block += [
            f'queue = "{conf.queue}"',
            f'backfill = "{conf.backfill}"',
            f"backfill_depth = {conf.backfill_depth}",
            f"nodes_shared = {'false' if exclusive or partition.exclusive else 'true'}",
            "preemption = false",
            "",
        ]
        blocks.append((partition.default and not partition.accounts, block))
    header = [f"# from {source} by manage.py import_slurm; see docs/simulator.md", ""]
    # the default partition (no teams: every job) goes last, so the team pools above it match first
    body = [line for default, block in sorted(blocks, key=lambda b: b[0]) for line in block]
    return "\n".join(header + body)
