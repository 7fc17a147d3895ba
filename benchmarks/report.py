"""Weekly capacity report build time over a year of history for 8,000 GPUs / 50 teams.

    .venv/bin/python benchmarks/report.py [--database sqlite|postgresql|both] [--quick] [--repeat 3]

Fleet (``manage.py generate_history``): 1,000 nodes / 8,000 GPUs, 50 teams, a year of hourly and daily
rollups, ~600 workloads a day, a week of scrapes. Generated once per database (SQLite under
var/bench/report.sqlite3; PostgreSQL at $BENCH_REPORT_DATABASE_URL, default
postgres://postgres@127.0.0.1:5432/gpuportal_report_bench) and reused. One JSON line per step: the
report build of the last full week (all eight sections, with the week before recomputed for the trend),
then its HTML, PDF and CSV renderings; wall seconds and this process's CPU seconds (the figure that
survives a loaded machine; on PostgreSQL it leaves out the server's own time). Goal: build <= 30 s.
Figures only, never assertions.
"""

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
PG_URL = os.environ.get("BENCH_REPORT_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/gpuportal_report_bench")

from benchmarks.web import run_per_database  # noqa: E402


def sqlite_url(quick: bool) -> str:
    return f"sqlite:///{ROOT / 'var' / 'bench' / ('report-quick.sqlite3' if quick else 'report.sqlite3')}"


def timed(step: str, vendor: str, function, repeat: int = 1) -> object:
    walls, cpus, result = [], [], None
    for _ in range(repeat):
        started, started_cpu = time.perf_counter(), time.process_time()
        result = function()
        walls.append(time.perf_counter() - started)
        cpus.append(time.process_time() - started_cpu)
    row = {
        "step": step,
        "database": vendor,
        "wall_s": round(min(walls), 3),
        "cpu_s": round(min(cpus), 3),
        "wall_s_max": round(max(walls), 3),
        "runs": repeat,
    }
    print(json.dumps(row), flush=True)
    return result


def child(args: argparse.Namespace) -> None:
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection
    from django.utils import timezone

    from scheduling.models import Orchestrator
    from scheduling.reports import documents as reports
    from scheduling.reports.capacity import week_before
    from scheduling.services.report_delivery import report_content

    call_command("migrate", verbosity=0)
    vendor = connection.vendor
    if not Orchestrator.objects.filter(name__startswith="gen-").exists():
        sizes = (
            {"nodes": 200, "teams": 20, "days": 30, "jobs_per_day": 200}
            if args.quick
            else {"nodes": 1000, "teams": 50, "days": 365, "jobs_per_day": 600}
        )
        started = time.perf_counter()
        call_command("generate_history", **sizes, stdout=sys.stderr)
        print(json.dumps({"database": vendor, "generated_s": round(time.perf_counter() - started, 1), **sizes}))
        if vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute("ANALYZE")
    window = week_before(timezone.now())
    content = timed("build report (8 sections)", vendor, lambda: report_content(window), args.repeat)
    timed("render html", vendor, lambda: reports.render_html(content, None))
    timed("render pdf", vendor, lambda: reports.render_pdf(content, None))
    timed("render csv", vendor, lambda: reports.render_csv(content, None))
    teams = content["sections"]["teams"]["teams"]
    print(
        json.dumps(
            {
                "database": vendor,
                "teams": len(teams),
                "pools": len(content["sections"]["capacity"]["pools"]),
                "capacity_h": content["headline"]["capacity_h"],
                "json_bytes": len(json.dumps(content)),
            }
        )
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--database", choices=("sqlite", "postgresql", "both"), default="both")
    parser.add_argument("--quick", action="store_true", help="200 nodes, 20 teams, 30 days (a smoke run)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args)
        return
    run_per_database(__file__, args, PG_URL, sqlite_url, ["--repeat", str(args.repeat)])


if __name__ == "__main__":
    main()
