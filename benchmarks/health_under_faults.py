"""How long /health and a what-if enqueue take when Redis is healthy, hung (SIGSTOP) or gone, when the
worker is SIGKILLed, and when PostgreSQL is hung (SIGSTOP). One JSON line per case; the goal is /health
answering within 2 s in every case (tests assert the answers, never times).

A private redis-server on a free port is the broker (tests/security/processes.py); /health is served
in-process by Django's test client, on a private PostgreSQL of its own when the binaries are here (never the
shared 5432), else on a throwaway SQLite database (then the PostgreSQL case is skipped). ``old_check``
replays the check /health made before bounded timeouts (kombu's ensure_connection), once, for comparison.
The worker case runs a real ``celery worker --beat`` with a 1 s heartbeat and a 5 s staleness limit, kills
it, and reports how long /health took to say so.

    python benchmarks/health_under_faults.py [--samples 5]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
VAR = tempfile.mkdtemp(prefix="gpuportal-bench-health-")
os.environ.update(DJANGO_SETTINGS_MODULE="gpuportal.settings_test", GPUPORTAL_VAR_DIR=VAR)
os.environ["DATABASE_URL"] = f"sqlite:///{VAR}/health.sqlite3"
# The worker case: beats every second, stale after five (the defaults are 15 s and 120 s).
os.environ.update(GPUPORTAL_HEARTBEAT_S="1", GPUPORTAL_WORKER_STALE_AFTER_S="5")
# The full checks (an anonymous caller gets one word, in which "not seen yet" also reads "ok").
os.environ["METRICS_TOKEN"] = "bench-health-token"


def _timed(call) -> tuple[float, object]:
    start = time.perf_counter()
    result = call()
    return time.perf_counter() - start, result


def _health(client) -> tuple[float, dict]:
    seconds, response = _timed(lambda: client.get("/health"))
    checks = response.json()["checks"]
    words = {name: str(checks.get(name, ""))[:60] for name in ("database", "broker", "worker", "rounds")}
    return seconds, {"status": response.status_code, **words}


def _enqueue(app) -> tuple[float, str]:
    def send() -> str:
        try:
            app.send_task("scheduling.tasks.ping", args=[1])
            return "queued"
        except Exception as error:  # what the view turns into a 503
            return f"refused: {type(error).__name__}"

    return _timed(send)


def _old_check(url: str) -> tuple[float, str]:
    """The check /health made before (kombu's ensure_connection, no socket timeouts), capped at 30 s."""
    from concurrent.futures import ThreadPoolExecutor
    from concurrent.futures import TimeoutError as FutureTimeout

    from kombu import Connection

    def check() -> str:
        try:
            with Connection(url, transport_options={}) as conn:
                conn.ensure_connection(max_retries=1, timeout=2)
                conn.default_channel.client.ping()
            return "ok"
        except Exception as error:
            return f"error: {type(error).__name__}"

    pool = ThreadPoolExecutor(max_workers=1)
    start = time.perf_counter()
    try:
        answer = pool.submit(check).result(timeout=30)
    except FutureTimeout:
        answer = "no answer after 30 s"
    pool.shutdown(wait=False)
    return time.perf_counter() - start, answer


def _case(name: str, samples: int, client, app) -> dict:
    health = [_health(client) for _ in range(samples)]
    enqueue = _enqueue(app)
    times = [s for s, _ in health]
    return {
        "case": name,
        "health_median_s": round(statistics.median(times), 3),
        "health_max_s": round(max(times), 3),
        "health_answer": health[-1][1],
        "enqueue_s": round(enqueue[0], 3),
        "enqueue": enqueue[1],
    }


def _worker_dead_case(samples: int, client, app, redis, database_url: str) -> None:
    """A real worker with beat: healthy while it beats; SIGKILLed, /health turns 503 within the limit."""
    import subprocess

    from tests.security import processes

    env = {**os.environ, "DATABASE_URL": database_url, "CELERY_BROKER_URL": redis.url}
    argv = [sys.executable, "-m", "celery", "-A", "gpuportal", "worker", "--beat", "--pool=solo"]
    argv += ["-Q", "celery,collect"]
    schedule = ["--schedule", f"{VAR}/beat-schedule", "--loglevel=WARNING"]
    # Its own process group: the embedded beat runs in a child process, and "the worker died" means all of them.
    worker = subprocess.Popen([*argv, *schedule], cwd=REPO, env=env, start_new_session=True)
    try:
        processes.wait_for(lambda: _health(client)[1]["worker"] == "ok", "the worker's first heartbeat", timeout=60)
        print(json.dumps(_case("worker alive", samples, client, app)), flush=True)
        os.killpg(worker.pid, signal.SIGKILL)
        worker.wait(10)
        killed = time.perf_counter()
        try:
            gone = lambda: _health(client)[1]["status"] == 503  # noqa: E731
            processes.wait_for(gone, "/health to see the worker gone", timeout=60)
        except AssertionError:  # a finding to report, not a reason to skip the other cases
            print(json.dumps({"case": "worker SIGKILLed", "not_noticed_in_s": 60, "answer": _health(client)[1]}))
            return
        noticed = round(time.perf_counter() - killed, 1)
        line = _case("worker SIGKILLed", samples, client, app) | {"noticed_after_s": noticed}
        print(json.dumps(line), flush=True)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(worker.pid, signal.SIGKILL)


def _postgres_hung_case(samples: int, client, app, postgres) -> None:
    postgres.pause()
    try:
        print(json.dumps(_case("postgresql SIGSTOPped", samples, client, app)), flush=True)
    finally:
        postgres.resume()
    print(json.dumps(_case("postgresql resumed", 1, client, app)), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--samples", type=int, default=5)
    samples = parser.parse_args().samples
    from tests.security import processes

    redis = processes.start_redis()
    os.environ["CELERY_BROKER_URL"] = redis.url  # before Django settings and Celery read it
    postgres = processes.start_postgres() if processes.postgres_bin() else None
    if postgres is not None:
        os.environ["DATABASE_URL"] = postgres.url
    import django

    django.setup()
    from django.core.management import call_command
    from django.test import Client

    from gpuportal.celery import app

    call_command("migrate", verbosity=0)
    client = Client(HTTP_HOST="127.0.0.1", HTTP_AUTHORIZATION="Bearer bench-health-token")
    client.get("/health")  # warm-up: the first request imports the views and reads the database's features
    try:
        _worker_dead_case(samples, client, app, redis, os.environ["DATABASE_URL"])
        if postgres is not None:
            _postgres_hung_case(samples, client, app, postgres)
        print(json.dumps(_case("redis healthy", samples, client, app)), flush=True)
        redis.pause()
        print(json.dumps(_case("redis SIGSTOPped", samples, client, app)), flush=True)
        seconds, answer = _old_check(redis.url)
        print(json.dumps({"case": "redis SIGSTOPped, old check", "seconds": round(seconds, 3), "answer": answer}))
        redis.resume()
        redis.stop()
        print(json.dumps(_case("redis stopped", samples, client, app)), flush=True)
    finally:
        redis.stop()
        if postgres is not None:
            postgres.remove()


if __name__ == "__main__":
    main()
