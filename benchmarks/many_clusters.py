"""A collection round across many clusters (issue 35 item 3): 4 Slurm, 6 Kubernetes and 3 Ray orchestrators, each
a hardware domain of its own whose node names repeat the others' (dgx01-08; Ray: ray-head, ray-worker-1/2).

Each orchestrator's scrape is ``collection.scrape`` with its kind's recorded answers parsed by the real parser
(tests/fleet_servers.py: what a Celery scrape task does after the bytes arrive: parse, ingest in one transaction,
ledger views and evaluation, usage samples). The scrapes of a round are spread over ``--workers`` forked processes,
as the collector worker's prefork pool runs them; one JSON line per case:

- ``round``: wall time of the whole round, CPU seconds of all processes, each scrape's wall time (median, max).
- ``stalled``: the same round with one Slurm cluster stalled for ``--stall`` seconds before it answers: the other
  twelve's latest finish (from the round's start) shows whether the stall delayed them.

The database is BENCH_DATABASE_URL's (an empty database you own: PostgreSQL, as a deployment runs; several
processes writing at once), else a throwaway SQLite file (the processes then take turns to write).

    BENCH_DATABASE_URL=postgres://.../empty python benchmarks/many_clusters.py --workers 2
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import resource
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks._django import throwaway_django  # noqa: E402


def _scrape(job: tuple[int, float, float]) -> tuple[int, float, float, float, bool]:
    """One scrape in a pool process: (pk, finished s after the round's start, own wall s, own CPU s, ok)."""
    from django.db import connection

    from scheduling.services import collection
    from tests.fleet_servers import recorded_collector

    pk, started_at, stall_s = job

    def collector_for(orchestrator, breaker):
        if stall_s:
            time.sleep(stall_s)  # the cluster answers, but only after this long
        return recorded_collector(orchestrator, breaker)

    began, cpu = time.perf_counter(), time.process_time()
    outcome = collection.scrape(pk, collector_for=collector_for)
    connection.close()
    ended = time.time()
    ok = bool(outcome.run and outcome.run.ok)
    return pk, ended - started_at, time.perf_counter() - began, time.process_time() - cpu, ok


def _register_site() -> list[tuple[int, str]]:
    from scheduling.services import collection
    from tests.fleet_servers import site_names

    rows = []
    for kind, name in site_names():
        orchestrator, _ = collection.register_orchestrator(
            kind=kind, name=name, url=f"http://{name}.example:8080", node_domain=name
        )
        rows.append((orchestrator.pk, name))
    return rows


def _round(pool, site: list[tuple[int, str]], stalled: str = "", stall_s: float = 0.0) -> dict:
    started = time.time()
    jobs = [(pk, started, stall_s if name == stalled else 0.0) for pk, name in site]
    results = pool.map(_scrape, jobs, chunksize=1)
    wall = time.time() - started
    names = dict(site)
    others = [finished for pk, finished, *_rest in results if names[pk] != stalled]
    own = [seconds for _pk, _finished, seconds, _cpu, _ok in results]
    return {
        "orchestrators": len(site),
        "ok": sum(ok for *_rest, ok in results),
        "round_wall_s": round(wall, 2),
        "round_cpu_s": round(sum(cpu for *_rest, cpu, _ok in results), 2),
        "scrape_wall_s_median": round(statistics.median(own), 3),
        "scrape_wall_s_max": round(max(own), 3),
        "others_done_s": round(max(others), 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=2, help="forked scrape processes (the prefork pool)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds timed after the first (which creates rows)")
    parser.add_argument("--stall", type=float, default=10.0, help="seconds the stalled cluster takes to answer")
    parser.add_argument("--no-ledger", action="store_true", help="diagnosis: skip the ledger evaluation per scrape")
    parser.add_argument("--ledger-waits", action="store_true",
                        help="the behaviour before: every scrape waits for the lock and evaluates the ledger")
    args = parser.parse_args()
    vendor = throwaway_django("many_clusters")
    from scheduling.services import collection, ledger

    if args.no_ledger:  # the forked processes inherit the replaced function
        collection.evaluate_after_scrape = lambda: None
    elif args.ledger_waits:
        collection.evaluate_after_scrape = ledger.evaluate_quietly
    from django.db import connection

    from scheduling.models import Node

    site = _register_site()
    connection.close()  # each forked process opens its own
    context = multiprocessing.get_context("fork")
    with context.Pool(args.workers) as pool:
        first = _round(pool, site)
        ledger_mode = "off" if args.no_ledger else "waits" if args.ledger_waits else "coalesced"
        common = {"bench": "many_clusters", "db": vendor, "workers": args.workers, "ledger": ledger_mode,
                  "load_avg_1m": round(os.getloadavg()[0], 2)}
        print(json.dumps({**common, "case": "first_round", **first}), flush=True)
        for _ in range(args.rounds):
            print(json.dumps({**common, "case": "round", **_round(pool, site)}), flush=True)
        stalled = _round(pool, site, stalled="slurm-2", stall_s=args.stall)
        print(json.dumps({**common, "case": "stalled", "stall_s": args.stall, **stalled}), flush=True)
    print(json.dumps({**common, "case": "rows", "nodes": Node.objects.count(),
                      "distinct_names": Node.objects.values("name").distinct().count(),
                      "peak_rss_mb_parent": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)}))


if __name__ == "__main__":
    main()
