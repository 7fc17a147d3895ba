"""GPU ledger detection speed (issue 10): 5,000 hosts x 3 sources per round, goal <= 1 s.

Every source lists every host (the worst case: the three orchestrators share one set of host names, as
the live fixtures do), one owner per host, with 1 % drift planted (double ownership, drained everywhere,
phantom GPUs, a failed GPU, unknown nodes) and the previous round's findings carried in. Prints JSON lines
with wall and CPU time (median of 5 rounds) for ``detect``, ``reconcile`` and ``ownership_changes``; then
the whole service round (``services.ledger.evaluate``: load views from the database, detect, write) on a
throwaway SQLite file, or on $BENCH_DATABASE_URL (an empty database you own) when set.
"""

import json
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from scheduling.engine.ledger import (
    Host,
    LedgerConfig,
    Source,
    SourceView,
    detect,
    ownership_changes,
    reconcile,
)

HOSTS = 5000
SOURCES = (("slurm", "slurm"), ("k8s", "kubernetes"), ("ray", "ray"))


def fleet(rng: random.Random) -> tuple[list[Host], list[Source]]:
    hosts = [Host(f"gpu{i:05d}", 8, expected_owner=SOURCES[i % 3][0]) for i in range(HOSTS)]
    drift = set(rng.sample(range(HOSTS), HOSTS // 100))
    sources = []
    for index, (name, kind) in enumerate(SOURCES):
        views = []
        for i in range(HOSTS):
            owner = i % 3 == index
            planted = i in drift
            schedulable = owner ^ (planted and i % 2 == 0 and index == (i + 1) % 3)  # a second owner
            if planted and i % 5 == 1:
                schedulable = False  # drained everywhere
            gpus = 7 if planted and i % 7 == 3 and owner else 8
            allocated = rng.randrange(0, gpus + 1) if schedulable else 0
            backed = float(allocated - (2 if planted and i % 11 == 4 and allocated >= 2 else 0))
            views.append(SourceView(name, f"gpu{i:05d}", schedulable, gpus, allocated, backed))
        views.extend(SourceView(name, f"stray{j}", True, 8) for j in range(5))
        sources.append(Source(name, kind, True, tuple(views)))
    return hosts, sources


def main() -> None:
    rng = random.Random(10)
    hosts, sources = fleet(rng)
    config = LedgerConfig(orphan_after_s=0, phantom_after_s=0)
    previous, intervals = (), set()
    timings: dict[str, list[tuple[float, float]]] = {"detect": [], "reconcile": [], "ownership_changes": []}
    for round_index in range(6):
        now = 1_000_000.0 + 30 * round_index
        wall, cpu = time.perf_counter(), time.process_time()
        detection = detect(hosts, (), sources, (), now, config)
        timings["detect"].append((time.perf_counter() - wall, time.process_time() - cpu))
        wall, cpu = time.perf_counter(), time.process_time()
        result = reconcile(previous, detection, now)
        timings["reconcile"].append((time.perf_counter() - wall, time.process_time() - cpu))
        wall, cpu = time.perf_counter(), time.process_time()
        to_open, to_close = ownership_changes(intervals, detection)
        timings["ownership_changes"].append((time.perf_counter() - wall, time.process_time() - cpu))
        previous, intervals = result.upserts, (intervals - to_close) | to_open
    for step, values in timings.items():
        values = values[1:]  # the first round warms caches
        print(json.dumps({
            "bench": f"ledger_{step}",
            "hosts": HOSTS,
            "sources": len(SOURCES),
            "views": sum(len(s.views) for s in sources),
            "findings": len(previous),
            "wall_ms_median": round(statistics.median(v[0] for v in values) * 1000, 1),
            "cpu_ms_median": round(statistics.median(v[1] for v in values) * 1000, 1),
        }))
    total = [sum(t[i][0] for t in timings.values()) for i in range(1, 6)]
    total_cpu = [sum(t[i][1] for t in timings.values()) for i in range(1, 6)]
    print(json.dumps({"bench": "ledger_round_engine", "hosts": HOSTS, "goal_ms": 1000,
                      "wall_ms_median": round(statistics.median(total) * 1000, 1),
                      "cpu_ms_median": round(statistics.median(total_cpu) * 1000, 1)}))


def service() -> None:
    os.environ["DJANGO_SETTINGS_MODULE"] = "gpuportal.settings_test"
    os.environ["DATABASE_URL"] = os.environ.get(
        "BENCH_DATABASE_URL", f"sqlite:///{tempfile.mkdtemp(prefix='gpuportal-bench-')}/ledger.sqlite3"
    )
    import django

    django.setup()
    from django.core.management import call_command
    from django.utils import timezone

    call_command("migrate", verbosity=0)
    from scheduling.models import FleetHost, Orchestrator
    from scheduling.models import SourceView as ViewRow
    from scheduling.services import ledger

    now = timezone.now()
    _, sources = fleet(random.Random(10))
    FleetHost.objects.bulk_create([FleetHost(name=f"gpu{i:05d}", gpu_total=8) for i in range(HOSTS)], batch_size=2000)
    for source in sources:
        orchestrator = Orchestrator.objects.create(
            name=source.name, kind=source.kind, endpoint=f"http://127.0.0.1:1/{source.name}", last_success_at=now
        )
        ViewRow.objects.bulk_create(
            [
                ViewRow(orchestrator=orchestrator, name=v.name, schedulable=v.schedulable, gpu_total=v.gpu_total,
                        gpu_allocated=v.gpu_allocated, gpu_backed=v.gpu_backed, seen_at=now)
                for v in source.views
            ],
            batch_size=2000,
        )
    samples = []
    for _ in range(4):
        wall, cpu = time.perf_counter(), time.process_time()
        outcome = ledger.evaluate(now)
        samples.append((time.perf_counter() - wall, time.process_time() - cpu))
    first, steady = samples[0], samples[1:]
    print(json.dumps({
        "bench": "ledger_service_round",
        "database": django.db.connection.vendor,
        "hosts": HOSTS,
        "views": sum(len(s.views) for s in sources),
        "open_findings": outcome.open_total,
        "first_round_wall_ms": round(first[0] * 1000, 1),
        "wall_ms_median": round(statistics.median(v[0] for v in steady) * 1000, 1),
        "cpu_ms_median": round(statistics.median(v[1] for v in steady) * 1000, 1),
    }))


if __name__ == "__main__":
    main()
    service()
