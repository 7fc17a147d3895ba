"""API (or, with ``--html``, page) load: 20 concurrent clients on loopback against gunicorn + PostgreSQL for a
bounded time.

Prints one JSON line per endpoint and one for the whole run (p50/p95/p99 ms, requests/s, errors) with
the CPU the run cost per request: the gunicorn workers' (``server_cpu_ms_per_request``), the PostgreSQL
backends' serving them and this load generator's, read from /proc. On a shared, loaded machine the
server's CPU per request is the figure to compare between runs; requests/s moves with the load.
Fleet: 1,000 nodes / 8,000 GPUs, 50 teams, 5,000 workloads, a week of hourly rollups.
Database: $BENCH_DATABASE_URL, default postgres://postgres@127.0.0.1:5432/gpuportal_bench (created if
absent); falls back to SQLite when PostgreSQL is unreachable, and says so in the JSON.
List answers are reused while the tables they read are unchanged (scheduling/api/list_cache.py); the
run reports the share served that way. ``--writes-per-s N`` commits N small writes a second beside the
clients (each to the node table, as a collector round writes it); ``--no-response-cache`` turns reuse off (list
answers and pages). ``--html`` signs each client in with a session cookie instead of a token and walks the main
HTML pages (``PAGES``; ``{team}`` is the team that client's user leads; client 0 is a portal admin) instead of the
API; each client keeps the cookies it is given (the CSRF cookie), as a browser does, and pages are reused as
``scheduling/views/page_cache.py`` allows.
Usage: python benchmarks/api_load.py [--seconds 20] [--clients 20] [--workers 4] [--threads 4]
       [--worker-class gthread|sync] [--writes-per-s 0] [--no-response-cache] [--html] [--quick]
"""

import argparse
import asyncio
import json
import os
import secrets
import socket
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
ENDPOINTS = (
    "/api/v1/teams/",
    "/api/v1/queues/",
    "/api/v1/nodes/",
    "/api/v1/nodes/?orchestrator=bench-slurm&state=mixed",
    "/api/v1/workloads/?state=pending",
    "/api/v1/quota-requests/",
    "/api/v1/usage/rollups/?resolution=hour&pool=true",
    "/api/v1/collector-runs/",
)

PAGES = (
    "/",
    "/teams/",
    "/quota/",
    "/utilisation/",
    "/workloads/mine/?scope=team",
    "/teams/{team}/",
)


def database_url() -> tuple[str, str]:
    url = os.environ.get("BENCH_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/gpuportal_bench")
    try:
        import psycopg

        admin = url.rsplit("/", 1)[0] + "/postgres"
        with psycopg.connect(admin.replace("postgres://", "postgresql://"), autocommit=True, connect_timeout=3) as c:
            name = url.rsplit("/", 1)[1]
            if not c.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone():
                c.execute(f'CREATE DATABASE "{name}"')
        return url, "postgresql"
    except Exception:
        return f"sqlite:///{ROOT / 'var' / 'bench' / 'api_load.sqlite3'}", "sqlite"


def environment(url: str) -> dict[str, str]:
    return {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "gpuportal.settings",
        "DATABASE_URL": url,
        "SECRET_KEY": os.environ.get("SECRET_KEY", secrets.token_urlsafe(50)),
        "DEBUG": "0",
        "ALLOWED_HOSTS": "127.0.0.1,localhost",
        "SECURE_SSL_REDIRECT": "0",
        "SESSION_COOKIE_SECURE": "0",
        "CSRF_COOKIE_SECURE": "0",
        "GPUPORTAL_VAR_DIR": str(ROOT / "var" / "bench"),
        "LOG_LEVEL": "WARNING",
        "API_THROTTLE_USER": "100000/min",
        # Shared by the workers as in production (throttle counters and stored list answers); else per process.
        **({"CACHE_URL": BENCH_REDIS} if _redis_up() else {}),
    }


BENCH_REDIS = os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/9")


def _redis_up() -> bool:
    try:
        import redis

        client = redis.Redis.from_url(BENCH_REDIS, socket_connect_timeout=1)
        client.flushdb()  # a database of its own: stored answers of an earlier run must not count
        return True
    except Exception:
        return False


def populate(env: dict[str, str], clients: int, html: bool) -> list[tuple[dict[str, str], list[str]]]:
    """Per client: its request headers (a token), or with ``html`` its cookies (the session), and the paths it walks."""
    os.environ.update(env)
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from benchmarks._fleet_fixture import build_fleet, build_sessions

    if html:
        sessions = build_sessions(clients)
        return [({"sessionid": key}, [page.format(team=team) for page in PAGES]) for key, team in sessions]
    return [({"Authorization": f"Token {token}"}, list(ENDPOINTS)) for token in build_fleet(clients)]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


CACHE_HEADER = "X-Gpuportal-Cache"


def _kind(path: str) -> str:
    """The path a sample is reported under: a client's own team page counts with the other team pages."""
    return path if path.startswith("/api/") or not path.startswith("/teams/bench-") else "/teams/{team}/"


async def client_loop(
    base: str,
    client: tuple[dict[str, str], list[str]],
    deadline: float,
    samples: dict[str, list[float]],
    errors: list[str],
    hits: list[bool],
):
    """One client: its paths in turn, one request at a time, until the deadline (aiohttp)."""
    import aiohttp

    credentials, paths = client
    timeout = aiohttp.ClientTimeout(total=30)
    jar = aiohttp.CookieJar(unsafe=True)  # unsafe: keep cookies of an IP address (127.0.0.1), as a browser does
    headers = credentials
    if "sessionid" in credentials:
        jar.update_cookies(credentials)
        headers = {}
    async with aiohttp.ClientSession(base_url=base, headers=headers, cookie_jar=jar, timeout=timeout) as session:
        index = 0
        while time.perf_counter() < deadline:
            path = paths[index % len(paths)]
            index += 1
            started = time.perf_counter()
            try:
                async with session.get(path) as response:
                    await response.read()
                    if response.status != 200:
                        errors.append(f"{path}: {response.status}")
                    hits.append(response.headers.get(CACHE_HEADER) == "hit")
            except (aiohttp.ClientError, TimeoutError) as error:
                errors.append(f"{path}: {type(error).__name__}")
                continue
            samples[_kind(path)].append((time.perf_counter() - started) * 1000)


CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _cpu_seconds(pid: int) -> float:
    """User + system CPU of one process (0 once it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def _children(parent: int) -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1]) == parent:
                    pids.append(int(entry.name))
            except (OSError, IndexError, ValueError):
                continue
    return pids


def _postgres_backends(url: str) -> list[int]:
    """Server processes of the benchmark database (PostgreSQL on this machine), to count their CPU too."""
    if not url.startswith("postgres"):
        return []
    import psycopg

    name = url.rsplit("/", 1)[1]
    with psycopg.connect(url.replace("postgres://", "postgresql://"), autocommit=True) as conn:
        rows = conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()", [name]
        ).fetchall()
    return [row[0] for row in rows]


def cpu_snapshot(server_pid: int, url: str) -> dict[str, float]:
    workers = _children(server_pid)
    return {
        "server": sum(_cpu_seconds(pid) for pid in [server_pid, *workers]),
        "database": sum(_cpu_seconds(pid) for pid in _postgres_backends(url)),
        "client": time.process_time(),
    }


TOUCH = "UPDATE scheduling_node SET name = name WHERE id = (SELECT min(id) FROM scheduling_node)"


def committing_writer(url: str, per_second: float, stop: threading.Event, commits: list[int]) -> None:
    """Commit ``per_second`` writes a second to the node table, as collector rounds do (a no-op update
    still counts as a write: the node lists are recomputed after each)."""
    import psycopg

    with psycopg.connect(url.replace("postgres://", "postgresql://"), autocommit=True) as conn:
        while not stop.wait(1 / per_second):
            conn.execute(TOUCH)
            commits.append(1)


def percentile(values: list[float], q: float) -> float:
    return round(statistics.quantiles(values, n=100, method="inclusive")[q - 1], 1) if len(values) > 1 else 0.0


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--clients", type=int, default=20)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--threads", type=int, default=4, help="threads per gthread worker")
    parser.add_argument(
        "--worker-class",
        default="sync",
        help="sync (default: measured faster here) or gthread (keep-alive, threads; more CPU per request on 2 cores)",
    )
    parser.add_argument("--writes-per-s", type=float, default=0, help="commits a second beside the clients")
    parser.add_argument("--no-response-cache", action="store_true", help="recompute every list answer and page")
    parser.add_argument("--html", action="store_true", help="the main HTML pages with a session, not the API")
    parser.add_argument("--quick", action="store_true", help="5 s, for a smoke run")
    args = parser.parse_args()
    seconds = 5 if args.quick else args.seconds
    url, vendor = database_url()
    env = environment(url)
    if args.no_response_cache:
        env["API_RESPONSE_CACHE_SECONDS"] = "0"
        env["PAGE_CACHE_SECONDS"] = "0"
    clients = populate(env, args.clients, args.html)
    scenario = "html_load" if args.html else "api_load"
    port = free_port()
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gunicorn",
            "gpuportal.wsgi",
            "-b",
            f"127.0.0.1:{port}",
            "-w",
            str(args.workers),
            "--preload",
            "--worker-class",
            args.worker_class,
            *(["--threads", str(args.threads)] if args.worker_class == "gthread" else []),
            "--log-level",
            "warning",
        ],
        cwd=ROOT,
        env=env,
    )
    try:
        _wait_for(port)
        _warm_up(f"http://127.0.0.1:{port}", clients[0], args.workers)
        samples: dict[str, list[float]] = {_kind(path): [] for path in clients[0][1]}
        errors: list[str] = []
        hits: list[bool] = []
        commits: list[int] = []
        stop = threading.Event()
        if args.writes_per_s > 0 and vendor == "postgresql":
            writer_args = (url, args.writes_per_s, stop, commits)
            threading.Thread(target=committing_writer, args=writer_args, daemon=True).start()
        cpu_before = cpu_snapshot(server.pid, url)
        deadline = time.perf_counter() + seconds
        started = time.perf_counter()

        async def run():
            await asyncio.gather(
                *(client_loop(f"http://127.0.0.1:{port}", c, deadline, samples, errors, hits) for c in clients)
            )

        asyncio.run(run())
        elapsed = time.perf_counter() - started
        cpu_after = cpu_snapshot(server.pid, url)
        stop.set()
    finally:
        server.terminate()
        server.wait(20)
    for path, values in samples.items():
        print(
            json.dumps(
                {
                    "scenario": scenario,
                    "endpoint": path,
                    "requests": len(values),
                    "p50_ms": percentile(values, 50),
                    "p95_ms": percentile(values, 95),
                    "p99_ms": percentile(values, 99),
                }
            )
        )
    every = [v for values in samples.values() for v in values]
    per_request = {
        f"{part}_cpu_ms_per_request": round(1000 * (cpu_after[part] - cpu_before[part]) / max(len(every), 1), 2)
        for part in cpu_before
    }
    print(
        json.dumps(
            {
                "scenario": f"{scenario}_total",
                "database": vendor,
                "cache": env.get("CACHE_URL", "locmem (per worker)"),
                "clients": args.clients,
                "gunicorn_workers": args.workers,
                "worker_class": args.worker_class,
                "threads": args.threads if args.worker_class == "gthread" else 1,
                "seconds": round(elapsed, 1),
                "requests": len(every),
                "requests_per_s": round(len(every) / elapsed, 1),
                "p50_ms": percentile(every, 50),
                "p95_ms": percentile(every, 95),
                "p99_ms": percentile(every, 99),
                "errors": len(errors),
                "response_cache": not args.no_response_cache,
                "served_from_cache": round(sum(hits) / max(len(hits), 1), 3),
                "writes_per_s": round(len(commits) / elapsed, 2),
                "error_examples": sorted(set(errors))[:5],
                **per_request,
                "load_average_1m": round(os.getloadavg()[0], 2),
                "nproc": os.cpu_count(),
            }
        )
    )


def _warm_up(base: str, client: tuple[dict[str, str], list[str]], workers: int) -> None:
    """Touch every path in every worker first (one client, ``2 × workers`` rounds): the run measures
    steady state, not first imports."""
    import aiohttp

    headers, paths = client

    async def rounds():
        async with aiohttp.ClientSession(base_url=base, headers=headers) as session:
            for _ in range(workers * 2):
                for path in paths:
                    async with session.get(path) as response:
                        await response.read()

    asyncio.run(rounds())


def _wait_for(port: int) -> None:
    for _ in range(100):
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError("gunicorn did not start")


if __name__ == "__main__":
    main()
