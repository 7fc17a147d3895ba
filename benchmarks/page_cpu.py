"""CPU per HTML page in-process: the Django test client renders each page of ``api_load.py --html`` as one of its
clients (client 1, a team lead), on the same fleet, and reports the best of ``--rounds`` × ``--renders`` renders'
CPU (process time, not wall: the machine is shared) and the page's query count. One JSON line per page. Pages are
drawn every time (``PAGE_CACHE_SECONDS=0``): this is what a page costs when it is not served stored.

    BENCH_DATABASE_URL=postgres://… .venv/bin/python benchmarks/page_cpu.py [--rounds 4] [--renders 8]

Figures only; the server-side complement of ``api_load.py --html`` (which measures a whole gunicorn's CPU).
"""

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.api_load import PAGES, database_url, environment  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--renders", type=int, default=8)
    args = parser.parse_args()
    url, vendor = database_url()
    env = environment(url)
    env.pop("CACHE_URL", None)  # a per-process cache: this measures one process
    env["PAGE_CACHE_SECONDS"] = "0"  # the cost of drawing each page, never a stored one (views/page_cache.py)
    env["ALLOWED_HOSTS"] = "testserver"
    os.environ.update(env)
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection
    from django.test import Client

    call_command("migrate", verbosity=0)
    from benchmarks._fleet_fixture import build_sessions

    key, team = build_sessions(2)[1]
    client = Client()
    client.cookies["sessionid"] = key
    for page in (p.format(team=team) for p in PAGES):
        queries = _count_queries(connection, client, page)
        rounds = []
        for _ in range(args.rounds):
            start = time.process_time()
            for _ in range(args.renders):
                client.get(page)
            rounds.append((time.process_time() - start) * 1000 / args.renders)
        print(json.dumps({"scenario": "page_cpu", "database": vendor, "page": page, "queries": queries,
                          "cpu_ms_best": round(min(rounds), 1), "cpu_ms_median": round(statistics.median(rounds), 1),
                          "load_1m": os.getloadavg()[0]}), flush=True)  # fmt: skip


def _count_queries(connection, client, page: str) -> int:
    queries: list[str] = []
    with connection.execute_wrapper(lambda execute, sql, *rest: queries.append(sql) or execute(sql, *rest)):
        assert client.get(page).status_code == 200, page
    return len(queries)


if __name__ == "__main__":
    main()
