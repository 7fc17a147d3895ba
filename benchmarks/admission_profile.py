"""Where an admission's CPU goes, in-process: N AdmissionReviews through Django's WSGI handler (every
middleware of the chosen settings, the view, the ORM, the database round trips; no TLS, no HTTP parsing),
on PostgreSQL as benchmarks/api_load.py ($BENCH_DATABASE_URL; SQLite if PostgreSQL is away).

Prints one JSON line per settings module: CPU ms per admission through the handler and through the view alone.
``--profile`` adds cProfile's top functions (CPU clock) for the first settings module.
Usage: python benchmarks/admission_profile.py [-n 1000] [--profile] [--settings gpuportal.settings_admission ...]
"""

import argparse
import cProfile
import io
import json
import os
import pstats
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.admission_latency import PATH, TOKEN, populate, review  # noqa: E402
from benchmarks.api_load import database_url, environment  # noqa: E402


def measure(settings: str, n: int, profile: bool) -> dict:
    url, vendor = database_url()
    env = {**environment(url), "DJANGO_SETTINGS_MODULE": settings, "GPUPORTAL_ADMISSION_TOKEN": TOKEN}
    populate(env)  # sets Django up, migrates and fills
    from django.core.handlers.wsgi import WSGIHandler
    from django.test import RequestFactory

    from scheduling.api.admission import mutate

    handler = WSGIHandler()

    def call(body: bytes) -> None:
        environ = {"REQUEST_METHOD": "POST", "PATH_INFO": PATH, "SERVER_NAME": "127.0.0.1", "SERVER_PORT": "443",
                   "HTTP_HOST": "127.0.0.1", "wsgi.url_scheme": "https", "CONTENT_TYPE": "application/json",
                   "CONTENT_LENGTH": str(len(body)), "wsgi.input": io.BytesIO(body), "wsgi.errors": sys.stderr,
                   "SERVER_PROTOCOL": "HTTP/1.1", "REMOTE_ADDR": "127.0.0.1", "HTTP_AUTHORIZATION": f"Bearer {TOKEN}"}
        status: list[str] = []
        b"".join(handler(environ, lambda code, headers, exc_info=None: status.append(code)))
        if not status[0].startswith("200"):
            raise SystemExit(f"admission answered {status[0]}")

    for _ in range(50):  # imports, the directory, prepared statements
        call(review())
    bodies = [review() for _ in range(n)]
    started = time.process_time()
    for body in bodies:
        call(body)
    handler_ms = (time.process_time() - started) / n * 1000
    requests = [RequestFactory().post(PATH, data=review(), content_type="application/json",
                                      HTTP_AUTHORIZATION=f"Bearer {TOKEN}") for _ in range(n)]
    started = time.process_time()
    for request in requests:
        mutate(request)
    view_ms = (time.process_time() - started) / n * 1000
    if profile:
        profiler = cProfile.Profile(time.process_time)
        profiler.runcall(lambda: [call(body) for body in bodies])
        out = io.StringIO()
        pstats.Stats(profiler, stream=out).sort_stats("cumulative").print_stats(40)
        print(out.getvalue(), file=sys.stderr)
    return {"scenario": "admission_in_process_cpu", "settings": settings, "database": vendor, "n": n,
            "cpu_ms_per_admission": round(handler_ms, 3), "view_only_cpu_ms": round(view_ms, 3),
            "load_average_1m": round(os.getloadavg()[0], 2), "nproc": os.cpu_count()}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("-n", type=int, default=1000)
    parser.add_argument("--profile", action="store_true")
    # The webhook is served only by the admission process (its own settings and URLs): the web port answers 404.
    parser.add_argument("--settings", nargs="+", default=["gpuportal.settings_admission"])
    parser.add_argument("--one", help=argparse.SUPPRESS)  # a child measuring one settings module
    args = parser.parse_args()
    if args.one:
        print(json.dumps(measure(args.one, args.n, args.profile)))
        return
    for index, settings in enumerate(args.settings):  # one process each: Django is set up once per process
        command = [sys.executable, __file__, "-n", str(args.n), "--one", settings]
        subprocess.run(command + (["--profile"] if args.profile and index == 0 else []), check=True)


if __name__ == "__main__":
    main()
