"""Replays fanned out over Celery: wall time with 1 and 2 workers against the serial run, as JSON lines.

    .venv/bin/python benchmarks/fanout.py [--trace philly-demo] [--seeds 8] [--workers 1,2]
        [--parts seeds,capacity,whatif] [--whatif-weeks 1] [--whatif-nodes 1000]

Needs Redis (``FANOUT_REDIS_URL``, default ``redis://127.0.0.1:6379/7``, broker and result backend); without
it prints one ``skipped`` line. Each worker is its own ``celery worker --pool=solo`` process (one core each),
started for the measurement and stopped after it. Two parts, each checked identical to the serial run:
``seeds`` (one federated replay per seed) and ``capacity_search`` (target every team's p95 <= 1 h, one
round of ``width = workers`` replays at a time); and ``whatif``: the two halves of a what-if (baseline and
scenario, ``benchmarks/whatif.py``'s synthetic history and fleet) as the ``run_whatif_half`` tasks the
what-if chord sends, each a JSON message with the whole history (the chord's last step, one UPDATE, is
left out). The halves write progress to a scenario row that does not exist, and the workers count each task's
outcome: a throwaway migrated SQLite database (unless DATABASE_URL is set) gives them the tables.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gpuportal.settings")
os.environ.setdefault("DEBUG", "1")
os.environ.setdefault("DATABASE_URL", f"sqlite:///{tempfile.mkdtemp(prefix='fanout-bench-')}/portal.sqlite3")

import django  # noqa: E402

django.setup()

from celery import Celery  # noqa: E402
from django.core.management import call_command  # noqa: E402

from benchmarks.whatif import baseline_and_scenario  # noqa: E402
from scheduling.services import whatif  # noqa: E402
from scheduling.services.simulation_runs import fan_out, run_replays, search_capacity  # noqa: E402
from scheduling.simulation.whatif import inputs_as_json  # noqa: E402
from tests.support import port_open  # noqa: E402

REDIS = os.environ.get("FANOUT_REDIS_URL", "redis://127.0.0.1:6379/7")


def emit(record: dict[str, object]) -> None:
    print(json.dumps(record), flush=True)


@contextmanager
def workers(count: int) -> Iterator[Celery]:
    env = {**os.environ, "CELERY_BROKER_URL": REDIS, "CELERY_RESULT_BACKEND": REDIS, "DEBUG": "1"}
    command = [sys.executable, "-m", "celery", "-A", "gpuportal", "worker", "--pool=solo", "--loglevel=WARNING",
               "--without-heartbeat", "--without-gossip", "--without-mingle"]
    processes = [subprocess.Popen([*command, "-n", f"fanout{i}@%h"], cwd=REPO, env=env) for i in range(count)]
    producer = Celery("fanout-bench", broker=REDIS, backend=REDIS)
    try:
        producer.control.purge()
        yield producer
    finally:
        for process in processes:
            process.terminate()
        for process in processes:
            process.wait(timeout=60)
        producer.close()


def timed(run: Callable[[], Any]) -> tuple[Any, float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    result = run()
    return result, time.perf_counter() - wall, time.process_time() - cpu


def part(name: str, run: Callable[[Celery], Any], counts: list[int]) -> None:
    serial, serial_wall, serial_cpu = timed(lambda: run(Celery("in-process")))
    record: dict[str, Any] = {"figure": f"fanout_{name}", "serial_wall_s": round(serial_wall, 2),
                              "serial_cpu_s": round(serial_cpu, 2)}
    for count in counts:
        with workers(count) as app:
            run(app)  # warm-up: workers import Django and read the trace once before the timed run
            result, wall, _ = timed(lambda app=app: run(app))
        record[f"workers_{count}_wall_s"] = round(wall, 2)
        record[f"workers_{count}_identical"] = json.loads(json.dumps(result, default=list)) == json.loads(
            json.dumps(serial, default=list))
    if len(counts) > 1:
        record["speed_up_last_vs_first"] = round(record[f"workers_{counts[0]}_wall_s"]
                                                 / record[f"workers_{counts[-1]}_wall_s"], 2)
    emit(record)


def whatif_halves(weeks: int, node_count: int) -> list[dict[str, Any]]:
    """The messages of one what-if's two halves: ``benchmarks/whatif.py``'s baseline and scenario."""
    no_row = 0  # progress writes find no scenario row: the measure is the replays and their messages
    return [{"scenario": no_row, "half": half, "inputs": inputs_as_json(inputs)}
            for half, inputs in zip(whatif.HALVES, baseline_and_scenario(weeks, node_count, 0.6, 1), strict=True)]


def whatif_figures(app: Celery, halves: list[dict[str, Any]]) -> list[dict[str, Any]]:
    answers = fan_out(whatif.HALF_TASK, halves, whatif.run_half, app=app)
    return [{k: v for k, v in answer["figures"].items() if k != "wall_time_s"} for answer in answers]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trace", default="philly-demo")
    parser.add_argument("--seeds", type=int, default=8)
    parser.add_argument("--workers", default="1,2")
    parser.add_argument("--parts", default="seeds,capacity,whatif")
    parser.add_argument("--whatif-weeks", type=int, default=1)
    parser.add_argument("--whatif-nodes", type=int, default=1000)
    args = parser.parse_args()
    parts = set(args.parts.split(","))
    if not port_open("127.0.0.1", 6379):
        emit({"figure": "fanout", "skipped": f"no Redis at {REDIS}"})
        return
    call_command("migrate", verbosity=0)  # the workers count each task's outcome in this database
    counts = [int(count) for count in args.workers.split(",")]
    specs = [{"trace": args.trace, "policy": "federated", "seed": seed} for seed in range(args.seeds)]
    if "seeds" in parts:
        part("seeds", lambda app: run_replays(specs, app=app), counts)
    spec = {"trace": args.trace, "policy": "federated"}
    search = {"low": 128, "high": 1024, "step": 32, "target": "every-team", "target_hours": 1.0}
    for count in counts if "capacity" in parts else []:
        part(f"capacity_search_width_{count}",
             lambda app, count=count: search_capacity(spec, **search, width=count, app=app).capacity_gpus, [count])
    if "whatif" in parts:
        halves = whatif_halves(args.whatif_weeks, args.whatif_nodes)
        part(f"whatif_{args.whatif_weeks}_weeks_{args.whatif_nodes}_nodes", lambda app: whatif_figures(app, halves),
             counts)


if __name__ == "__main__":
    main()
