"""A year of history for a 10,000-GPU site (issue 35 item 4): table sizes per month, every page's p95, the weekly
report's CPU, and the raw-history prune, on PostgreSQL.

    BENCH_HISTORY=1 .venv/bin/python benchmarks/history.py [--renders 20] [--skip-pages] [--skip-report]

Opt-in (``make bench`` prints a ``skipped`` line without BENCH_HISTORY=1): generating the year takes minutes
and a few GB. Fleet (``manage.py generate_history``): 1,250 nodes / 10,000 GPUs under Slurm, Kubernetes and
Ray, 200 teams (20 parents, 180 leaves), a year of hourly and daily rollups, 2,000 jobs a day (730,000
workloads), 48 hours of raw samples at 30-second rounds, a week of collector runs. Generated once into
$BENCH_HISTORY_DATABASE_URL (default postgres://postgres@127.0.0.1:5432/gpuportal_history_bench, created if
missing) and reused.

JSON lines:
- ``generated``: wall and CPU seconds of the generation (first run only);
- ``table``: rows, ``pg_total_relation_size`` (table, indexes, TOAST), bytes per row, and the growth per
  month: measured over the generated year for rollups and workloads, and for the raw tables rows per
  30-second round (counted in the generated rounds) × 86,400 rounds a month × bytes per row;
- ``page``: each main page as an admin and a researcher through Django's test client (DEBUG off; the portal loaded
  through ``gpuportal.wsgi``, its startup heap frozen as under gunicorn): p50/p95 wall
  and CPU ms over ``--renders`` renders after a warm-up (CPU: this thread's, and ``db_cpu``: the PostgreSQL
  backend's, read from /proc), and the queries of one render; every render draws the page (no stored pages);
- ``report``: the weekly capacity report of the last full week, wall and CPU seconds (this process, PostgreSQL);
- ``prune``: one ``prune_raw`` pass with the period set so that half of the raw samples are old.
Every line carries the load average when it was measured (2-core machine shared with other sessions).
Figures only, never assertions. Goals: every page p95 <= 300 ms; the weekly report <= 60 s CPU.
"""

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
PG_URL = os.environ.get("BENCH_HISTORY_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/gpuportal_history_bench")
SIZES = {
    "nodes": 1250, "teams": 200, "days": 365, "jobs_per_day": 2000, "sample_hours": 48, "sample_step": 30,
}  # fmt: skip
ROUND_S = 30
ROUNDS_PER_MONTH = 30 * 86400 // ROUND_S

from benchmarks.web import child_environment, percentile, postgres_ready  # noqa: E402


def load() -> float:
    return float(Path("/proc/loadavg").read_text().split()[0])


def emit(row: dict) -> None:
    print(json.dumps({**row, "load_1m": load()}), flush=True)


# ------------------------------------------------------------------------------------------------ sizes


def table_sizes() -> None:
    from django.db import connection
    from django.utils import timezone

    from scheduling.models import (
        CollectorRun,
        EnforcementOutcome,
        EnforcementRun,
        FragmentationSample,
        UsageRollup,
        UsageSample,
        Workload,
        WorkloadUtilisation,
    )

    now = timezone.now()
    month_ago = now - timezone.timedelta(days=30)
    raw_rounds = {
        UsageSample: UsageSample.objects.values("taken_at").distinct().count(),
        CollectorRun: CollectorRun.objects.values("started_at").distinct().count(),
        FragmentationSample: FragmentationSample.objects.count(),
    }
    grown_last_month = {
        UsageRollup: UsageRollup.objects.filter(period_start__gte=month_ago).count(),
        Workload: Workload.objects.filter(submitted_at__gte=month_ago).count(),
    }
    total = 0.0
    for model in (UsageRollup, UsageSample, Workload, CollectorRun, FragmentationSample, WorkloadUtilisation,
                  EnforcementRun, EnforcementOutcome):  # fmt: skip
        table = model._meta.db_table
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_total_relation_size(%s), (SELECT count(*) FROM " + table + ")", [table])  # nosec B608
            size, rows = cursor.fetchone()
        per_row = size / rows if rows else None
        row = {"figure": "table", "table": table, "rows": rows, "total_bytes": size,
               "bytes_per_row": round(per_row, 1) if per_row else None}  # fmt: skip
        if model in grown_last_month and per_row:
            row |= {
                "rows_per_month": grown_last_month[model],
                "basis": "rows of the last 30 days of the generated year",
            }
        elif model in raw_rounds and per_row and raw_rounds[model]:
            per_round = rows / raw_rounds[model]
            if model is FragmentationSample:
                per_round = 1.0  # one per round; the generator stores one per 5 minutes
            row |= {"rows_per_round": round(per_round, 1), "rows_per_month": round(per_round * ROUNDS_PER_MONTH),
                    "basis": "rows per 30 s round x 86,400 rounds"}  # fmt: skip
        if "rows_per_month" in row:
            row["mb_per_month"] = round(row["rows_per_month"] * per_row / 1e6, 1)
            total += row["mb_per_month"]
        emit(row)
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_database_size(current_database())")
        (database,) = cursor.fetchone()
    emit({"figure": "database", "total_bytes": database, "mb_per_month_of_the_tables_above": round(total, 1)})


# ------------------------------------------------------------------------------------------------ pages


def page_list(prefix: str) -> list[tuple[str, str, str]]:
    from django.urls import reverse

    from benchmarks.web import pages

    leaf = f"{prefix}team001"
    return [
        *pages(prefix),
        ("overview (6 h, 3 weeks back: rollups)", "admin", reverse("overview") + "?" + _weeks_back(3)),
        ("finished jobs", "admin", reverse("finished-workloads")),
        ("finished jobs", "researcher", reverse("finished-workloads")),
        ("finished jobs (30d)", "admin", reverse("finished-workloads") + "?range=30d"),
        ("audit log", "admin", reverse("audit-log")),
        ("utilisation drill-down (team, 30d)", "admin", reverse("usage-team", args=[leaf]) + "?range=30d"),
        ("team detail (leaf, 7d)", "researcher", reverse("team-detail", args=[leaf])),
        ("governance", "admin", reverse("governance")),
        ("reclaim", "admin", reverse("reclaim")),
    ]


def _weeks_back(weeks: int) -> str:
    """A pinned six-hour window ``weeks`` back: older than the raw samples kept, so drawn from hourly rollups."""
    from urllib.parse import urlencode

    from django.utils import timezone

    end = (timezone.now() - timezone.timedelta(weeks=weeks)).replace(minute=0, second=0, microsecond=0)
    return urlencode({"range": "6h", "end": end.isoformat()})


def _query_count(client, url: str) -> int:
    """Counted by a wrapper: CaptureQueriesContext's log is cleared by request_started inside the request."""
    from django.db import connection

    queries: list[str] = []

    def count(execute, sql, params, many, context):
        queries.append(sql)
        return execute(sql, params, many, context)

    with connection.execute_wrapper(count):
        client.get(url)
    return len(queries)


def backend_cpu_s() -> float:
    """CPU seconds the PostgreSQL backend serving this process has used (from /proc: same machine, as root)."""
    from django.db import connection

    connection.ensure_connection()
    pid = connection.connection.info.backend_pid
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measure_pages(renders: int, only: str = "") -> None:
    from django.conf import settings
    from django.contrib.auth import get_user_model
    from django.test import Client

    clients = {}
    for role in ("admin", "researcher"):
        clients[role] = Client()
        clients[role].force_login(get_user_model().objects.get(username=f"gen-{role}"))
    for name, role, url in page_list("gen-"):
        if only not in name:
            continue
        client = clients[role]
        warm = client.get(url)
        if warm.status_code != 200:
            emit({"figure": "page", "page": name, "role": role, "url": url, "status": warm.status_code})
            continue
        queries = _query_count(client, url)
        walls, cpus, database = [], [], []
        for _ in range(renders):
            started, started_cpu, started_db = time.perf_counter(), time.thread_time(), backend_cpu_s()
            client.get(url)
            walls.append((time.perf_counter() - started) * 1000)
            cpus.append((time.thread_time() - started_cpu) * 1000)
            database.append((backend_cpu_s() - started_db) * 1000)
        emit({"figure": "page", "page": name, "role": role, "p50_ms": percentile(walls, 0.5),
              "p95_ms": percentile(walls, 0.95), "cpu_p50_ms": percentile(cpus, 0.5),
              "cpu_p95_ms": percentile(cpus, 0.95), "db_cpu_p50_ms": percentile(database, 0.5), "queries": queries,
              "url": url,
              "page_cache": settings.PAGE_CACHE_SECONDS > 0})  # fmt: skip


# ------------------------------------------------------------------------------------------------ report, prune


def measure_report() -> None:
    from django.utils import timezone

    from scheduling.reports.capacity import week_before
    from scheduling.services.report_delivery import report_content

    window = week_before(timezone.now())
    started, started_cpu, started_db = time.perf_counter(), time.process_time(), backend_cpu_s()
    content = report_content(window)
    emit({"figure": "report", "step": "build report (8 sections)", "wall_s": round(time.perf_counter() - started, 2),
          "cpu_s": round(time.process_time() - started_cpu, 2), "db_cpu_s": round(backend_cpu_s() - started_db, 2),
          "teams": len(content["sections"]["teams"]["teams"]), "goal_cpu_s": 60})  # fmt: skip


def measure_prune() -> None:
    """One pass over the generated raw samples with the period reaching back to the middle of them: what the hourly
    task costs when an hour's rounds are due, and what a shortened period costs on its first pass."""
    from django.db import transaction
    from django.utils import timezone

    from scheduling.models import UsageSample
    from scheduling.selectors.retention import raw_days
    from scheduling.services import retention

    oldest = UsageSample.objects.order_by("taken_at").values_list("taken_at", flat=True).first()
    if oldest is None:
        return
    now = timezone.now()
    span = now - oldest
    # The period cannot be under 8 days: move "now" instead, so the cutoff falls mid-way through the samples.
    pretend_now = oldest + span / 2 + timezone.timedelta(days=raw_days())
    with transaction.atomic():
        sid = transaction.savepoint()
        started, started_cpu = time.perf_counter(), time.process_time()
        deleted = retention.prune_raw(pretend_now)
        wall, cpu = time.perf_counter() - started, time.process_time() - started_cpu
        transaction.savepoint_rollback(sid)  # the database stays as generated
    emit({"figure": "prune", "deleted": deleted, "wall_s": round(wall, 2), "cpu_s": round(cpu, 2),
          "note": "one pass, 5,000 rows a batch; rolled back afterwards"})  # fmt: skip


# ------------------------------------------------------------------------------------------------ main


def child(args: argparse.Namespace) -> None:
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection

    from scheduling.models import Orchestrator

    # No setup_test_environment(): its instrumented template rendering (a signal and a context copy per template)
    # costs a third of a table-heavy page; a served page has none of it.
    call_command("migrate", verbosity=0)
    if not Orchestrator.objects.filter(name__startswith="gen-").exists():
        started, started_cpu = time.perf_counter(), time.process_time()
        call_command("generate_history", **SIZES, stdout=sys.stderr)
        emit({"figure": "generated", "wall_s": round(time.perf_counter() - started, 1),
              "cpu_s": round(time.process_time() - started_cpu, 1), **SIZES})  # fmt: skip
        with connection.cursor() as cursor:
            cursor.execute("VACUUM ANALYZE")
    table_sizes()
    import gpuportal.wsgi  # noqa: F401  (as gunicorn loads the portal: the startup heap frozen out of full GCs)

    if not args.skip_pages:
        measure_pages(args.renders, args.only)
    if not args.skip_report:
        measure_report()
    if not args.skip_prune:
        measure_prune()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--renders", type=int, default=20)
    parser.add_argument("--skip-pages", action="store_true")
    parser.add_argument("--skip-report", action="store_true")
    parser.add_argument("--skip-prune", action="store_true")
    parser.add_argument(
        "--page-cache", action="store_true", help="serve stored pages again (default: every render draws the page)"
    )
    parser.add_argument("--only", default="", help="pages whose name contains this text")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args)
        return
    if os.environ.get("BENCH_HISTORY") != "1":
        print(
            json.dumps(
                {"benchmark": "history", "skipped": "opt-in: BENCH_HISTORY=1 (generates a year for 10,000 GPUs)"}
            )
        )
        return
    if not postgres_ready(PG_URL):
        return
    command = [sys.executable, __file__, "--child", "--renders", str(args.renders), "--only", args.only]
    for skip in ("pages", "report", "prune"):
        command += [f"--skip-{skip}"] * getattr(args, f"skip_{skip}")
    # Every render draws its page unless --page-cache: the stored pages (views/page_cache.py) answer in ~2 ms
    # and would hide what drawing costs.
    env = {**child_environment(PG_URL), "PAGE_CACHE_SECONDS": "30" if args.page_cache else "0"}
    subprocess.run(command, env=env, check=True)


if __name__ == "__main__":
    main()
