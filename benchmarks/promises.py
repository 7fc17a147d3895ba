"""Cost of the promise check approval runs under the capacity lock (issue 16).

Engine: ``check_promise`` for a year-long candidate against 500 teams' standing guarantees and N grants
spread over a year on three GPU models (N = 2,000, 20,000, 200,000): every grant's start and end splits the
year, so the candidate is checked over about 2N intervals. Service: ``capacity.check_new_promise`` (load the
supply, the guarantees and the overlapping grants from the database, then the engine) with 500 top-level
teams and 2,000 grants, on a throwaway SQLite file or on $BENCH_DATABASE_URL (an empty database you own).
Prints JSON lines: median wall and CPU time of 5 runs after one warm-up.
"""

import json
import os
import random
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from scheduling.engine.promises import Promise, check_promise

T0 = datetime(2027, 1, 1, tzinfo=UTC)
SUPPLY = {"A100": 4000, "H100": 5000, "B200": 1000}
MODELS = ("", "A100", "H100", "B200")
TEAMS = 500


def grants(rng: random.Random, count: int) -> list[tuple[int, str, datetime, datetime]]:
    """Small grants (1-16 GPUs, 1-30 days) starting anywhere in the year, a quarter of them any-model."""
    rows = []
    for _ in range(count):
        start = T0 + timedelta(hours=rng.randrange(365 * 24))
        rows.append((rng.randint(1, 16), rng.choice(MODELS), start, start + timedelta(days=rng.randint(1, 30))))
    return rows


def measure(run) -> tuple[float, float, object]:
    samples, result = [], None
    for _ in range(6):
        wall, cpu = time.perf_counter(), time.process_time()
        result = run()
        samples.append((time.perf_counter() - wall, time.process_time() - cpu))
    steady = samples[1:]  # the first run warms caches
    return statistics.median(s[0] for s in steady), statistics.median(s[1] for s in steady), result


def engine() -> None:
    rng = random.Random(16)
    guarantees = [Promise(rng.randint(0, 4), rng.choice(MODELS)) for _ in range(TEAMS)]
    candidate = Promise(64, "H100", T0, T0 + timedelta(days=366))
    for count in (2_000, 20_000, 200_000):
        promises = guarantees + [Promise(*row) for row in grants(rng, count)]
        wall, cpu, result = measure(lambda promises=promises: check_promise(SUPPLY, promises, candidate))
        print(json.dumps({
            "bench": "promises_engine_check",
            "teams": TEAMS,
            "grants": count,
            "models": len(SUPPLY),
            "fits": result.fits,
            "room": result.room,
            "wall_ms_median": round(wall * 1000, 1),
            "cpu_ms_median": round(cpu * 1000, 1),
        }))


def service() -> None:
    os.environ["DJANGO_SETTINGS_MODULE"] = "gpuportal.settings_test"
    os.environ["DATABASE_URL"] = os.environ.get(
        "BENCH_DATABASE_URL", f"sqlite:///{tempfile.mkdtemp(prefix='gpuportal-bench-')}/promises.sqlite3"
    )
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from scheduling.models import Node, Orchestrator, Queue, QuotaGrant, QuotaRequest, Team
    from scheduling.services import capacity

    rng = random.Random(16)
    orchestrator = Orchestrator.objects.create(name="bench", kind="slurm", endpoint="http://127.0.0.1:1/bench")
    Node.objects.bulk_create(_nodes(Node, orchestrator), batch_size=2000)
    teams = Team.objects.bulk_create([Team(slug=f"t{i}", name=f"t{i}") for i in range(TEAMS)])
    Queue.objects.bulk_create(
        [Queue(team=t, gpu_model=rng.choice(MODELS), weight=0, guaranteed=2, burst_limit=8) for t in teams]
    )
    user = get_user_model().objects.create_user("bench")
    rows = grants(rng, 2_000)
    requests = QuotaRequest.objects.bulk_create(
        [QuotaRequest(requester=user, team=teams[i % TEAMS], gpus=g, gpu_model=m, starts_at=s, ends_at=e,
                      justification="bench", state="approved") for i, (g, m, s, e) in enumerate(rows)]
    )
    QuotaGrant.objects.bulk_create(
        [QuotaGrant(request=r, team=r.team, gpus=r.gpus, gpu_model=r.gpu_model, starts_at=r.starts_at,
                    ends_at=r.ends_at) for r in requests]
    )
    end = T0 + timedelta(days=366)
    wall, cpu, result = measure(lambda: capacity.check_new_promise(64, "H100", T0, end))
    print(json.dumps({
        "bench": "promises_service_check",
        "database": django.db.connection.vendor,
        "teams": TEAMS,
        "grants": len(rows),
        "fits": result.fits,
        "room": result.room,
        "wall_ms_median": round(wall * 1000, 1),
        "cpu_ms_median": round(cpu * 1000, 1),
    }))


def _nodes(node_model, orchestrator) -> list:
    return [
        node_model(orchestrator=orchestrator, name=f"{model}-{i:05d}", gpu_model=model, gpu_total=8)
        for model, gpus in SUPPLY.items()
        for i in range(gpus // 8)
    ]


if __name__ == "__main__":
    engine()
    service()
