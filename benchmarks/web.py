"""Page render speed: every portal page rendered in-process against a year of history.

    .venv/bin/python benchmarks/web.py [--renders 50] [--database sqlite|postgresql|both] [--quick]

Fleet (``manage.py generate_history``): 1,000 nodes / 8,000 GPUs, 50 teams, a year of hourly and daily
rollups, two days of one-minute raw samples, ~600 workloads a day. It is generated once per database
(SQLite under var/bench/web.sqlite3; PostgreSQL at $BENCH_WEB_DATABASE_URL, default
postgres://postgres@127.0.0.1:5432/gpuportal_web_bench, skipped with a note if unreachable) and reused.
Each page is rendered ``--renders`` times through Django's test client (middleware, sessions, templates,
charts) after one warm-up; one JSON line per page: page, database, role, p50_ms, p95_ms (wall clock),
cpu_p50_ms, cpu_p95_ms (this thread's CPU time: the figure that survives a shared, loaded machine; on
PostgreSQL it leaves out the server's own time), queries.
Goals: every page p95 <= 300 ms, the overview <= 150 ms. Figures only, never assertions.
"""

import argparse
import json
import os
import secrets
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
PG_URL = os.environ.get("BENCH_WEB_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/gpuportal_web_bench")


def sqlite_url(quick: bool) -> str:
    return f"sqlite:///{ROOT / 'var' / 'bench' / ('web-quick.sqlite3' if quick else 'web.sqlite3')}"


def postgres_ready(url: str) -> bool:
    try:
        import psycopg

        admin = url.rsplit("/", 1)[0] + "/postgres"
        with psycopg.connect(admin.replace("postgres://", "postgresql://"), autocommit=True, connect_timeout=3) as c:
            name = url.rsplit("/", 1)[1]
            if not c.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone():
                c.execute(f'CREATE DATABASE "{name}"')
        return True
    except Exception as error:
        print(json.dumps({"database": "postgresql", "skipped": f"unreachable: {error}"}), flush=True)
        return False


def child_environment(url: str) -> dict[str, str]:
    return {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "gpuportal.settings",
        "DATABASE_URL": url,
        "SECRET_KEY": os.environ.get("SECRET_KEY", secrets.token_urlsafe(50)),
        "DEBUG": "0",
        "ALLOWED_HOSTS": "testserver,127.0.0.1,localhost",
        "SESSION_COOKIE_SECURE": "0",
        "CSRF_COOKIE_SECURE": "0",
        "SECURE_SSL_REDIRECT": "0",
        "GPUPORTAL_VAR_DIR": str(ROOT / "var" / "bench"),
        "LOG_LEVEL": "WARNING",
    }


def pages(prefix: str) -> list[tuple[str, str, str]]:
    """(name, role, url) for every page; history pages at their default window and over a year."""
    from django.urls import reverse

    from scheduling.models import QuotaRequest

    request = QuotaRequest.objects.filter(team__slug__startswith=prefix).order_by("pk").first()
    parent, leaf = f"{prefix}org01", f"{prefix}team001"
    return [
        ("overview", "admin", reverse("overview")),
        ("overview 365d", "admin", reverse("overview") + "?range=365d"),
        ("overview", "researcher", reverse("overview")),
        ("teams", "admin", reverse("team-list")),
        ("team detail (parent, 7d)", "admin", reverse("team-detail", args=[parent])),
        ("team detail (parent, 365d)", "admin", reverse("team-detail", args=[parent]) + "?range=365d"),
        ("team detail (leaf, 24h)", "researcher", reverse("team-detail", args=[leaf]) + "?range=24h"),
        ("fragmentation (24h trend)", "admin", reverse("fragmentation")),
        ("fragmentation (7d trend)", "admin", reverse("fragmentation") + "?range=7d"),
        ("utilisation (7d)", "admin", reverse("utilisation")),
        ("utilisation (365d)", "admin", reverse("utilisation") + "?range=365d"),
        ("quota requests", "admin", reverse("quota-list")),
        ("quota request form", "researcher", reverse("quota-new")),
        ("quota request detail", "admin", reverse("quota-detail", args=[request.pk])),
        ("fair share", "admin", reverse("fairshare")),
        ("fair-share history", "admin", reverse("fairshare-history")),
        ("orchestrators", "admin", reverse("orchestrators")),
        ("rebalance", "admin", reverse("rebalance")),
        ("ledger", "admin", reverse("ledger")),
        ("forecast", "admin", reverse("forecast")),
        ("what-if", "admin", reverse("whatif")),
        ("reports", "researcher", reverse("report-list")),
        ("my workloads", "researcher", reverse("my-workloads")),
    ]


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, max(0, round(fraction * len(ordered)) - 1))], 1)


def child(args: argparse.Namespace) -> None:
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext, setup_test_environment

    from scheduling.models import Orchestrator

    setup_test_environment()
    call_command("migrate", verbosity=0)
    vendor = connection.vendor
    if not Orchestrator.objects.filter(name__startswith="gen-").exists():
        started = time.perf_counter()
        sizes = (
            {"nodes": 200, "teams": 20, "days": 30, "jobs_per_day": 200}
            if args.quick
            else {"nodes": 1000, "teams": 50, "days": 365, "jobs_per_day": 600}
        )
        call_command("generate_history", **sizes, stdout=sys.stderr)
        print(json.dumps({"database": vendor, "generated_s": round(time.perf_counter() - started, 1), **sizes}))
    if args.renders <= 0:
        return  # --renders 0: only build the database
    if vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE")
    clients = {}
    for role in ("admin", "researcher"):
        clients[role] = Client()
        clients[role].force_login(get_user_model().objects.get(username=f"gen-{role}"))
    for name, role, url in pages("gen-"):
        client = clients[role]
        warm = client.get(url)  # warm-up (template and URL caches)
        assert warm.status_code == 200, (url, warm.status_code, warm.content[:300])
        with CaptureQueriesContext(connection) as queries:
            client.get(url)
        query_count = len(queries.captured_queries)
        timings, cpu = [], []
        for _ in range(args.renders):
            started, started_cpu = time.perf_counter(), time.thread_time()
            response = client.get(url)
            timings.append((time.perf_counter() - started) * 1000)
            cpu.append((time.thread_time() - started_cpu) * 1000)
            assert response.status_code == 200
        row = {
            "page": name,
            "database": vendor,
            "role": role,
            "p50_ms": percentile(timings, 0.5),
            "p95_ms": percentile(timings, 0.95),
            "cpu_p50_ms": percentile(cpu, 0.5),
            "cpu_p95_ms": percentile(cpu, 0.95),
            "queries": query_count,
            "url": url,
        }
        print(json.dumps(row), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--renders", type=int, default=50)
    parser.add_argument("--database", choices=("sqlite", "postgresql", "both"), default="both")
    parser.add_argument("--quick", action="store_true", help="200 nodes, 20 teams, 30 days (a smoke run)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args)
        return
    run_per_database(__file__, args, PG_URL, sqlite_url, ["--renders", str(args.renders)])


def run_per_database(script: str, args: argparse.Namespace, pg_url: str, sqlite, extra: list[str]) -> None:
    """Run ``script --child`` once per chosen database: each child configures Django for its own URL."""
    (ROOT / "var" / "bench").mkdir(parents=True, exist_ok=True)
    suffix = "_quick" if args.quick else ""
    urls = []
    if args.database in ("sqlite", "both"):
        urls.append(sqlite(args.quick))
    if args.database in ("postgresql", "both") and postgres_ready(pg_url + suffix):
        urls.append(pg_url + suffix)
    for url in urls:
        command = [sys.executable, script, "--child", *extra, *(["--quick"] if args.quick else [])]
        subprocess.run(command, env=child_environment(url), check=True)


if __name__ == "__main__":
    main()
