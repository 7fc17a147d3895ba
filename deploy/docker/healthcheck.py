#!/usr/bin/env python3
"""The image's health probe: ``gpuportal-healthcheck web|worker|collector|beat``; exit 0 healthy, 1 not.

web     GET /health on this container's gunicorn (200 only when the database and broker answer). It is
        sent as ``Host: localhost`` (ALLOWED_HOSTS must list it) and ``X-Forwarded-Proto: https``: the
        portal runs behind a TLS proxy (BEHIND_TLS_PROXY=1), so a plain-HTTP probe is not redirected.
worker  Celery's ``ping`` to this container's own worker node (celery@<hostname>) through the broker.
collector  The same for the scrape worker (collector@<hostname>, the collect queue).
beat    The beat schedule file was written in the last GPUPORTAL_BEAT_STALE_S seconds (default 900): beat
        syncs it every three minutes while it sends tasks, and the portal's round sends one every 30 s.
"""

from __future__ import annotations

import glob
import http.client
import os
import socket
import sys
import time


def web() -> bool:
    port = int(os.environ.get("PORT", "8000"))
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=8)
    try:
        conn.request("GET", "/health", headers={"Host": "localhost", "X-Forwarded-Proto": "https"})
        return conn.getresponse().status == 200
    except OSError:
        return False
    finally:
        conn.close()


def _pong(prefix: str) -> bool:
    from gpuportal.celery import app

    node = f"{prefix}@{socket.gethostname()}"
    return bool(app.control.ping(destination=[node], timeout=5.0))


def worker() -> bool:
    return _pong("celery")


def collector() -> bool:
    return _pong("collector")


def beat() -> bool:
    var_dir = os.environ.get("GPUPORTAL_VAR_DIR", "/app/var")
    schedule = os.environ.get("GPUPORTAL_BEAT_SCHEDULE", os.path.join(var_dir, "celerybeat-schedule"))
    stale_s = float(os.environ.get("GPUPORTAL_BEAT_STALE_S", "900"))
    written = [os.path.getmtime(path) for path in glob.glob(glob.escape(schedule) + "*")]  # dbm may add .db
    return bool(written) and time.time() - max(written) < stale_s


PROBES = {"web": web, "worker": worker, "collector": collector, "beat": beat}

if __name__ == "__main__":
    if len(sys.argv) != 2 or sys.argv[1] not in PROBES:
        sys.exit(f"usage: gpuportal-healthcheck {'|'.join(PROBES)}")
    sys.exit(0 if PROBES[sys.argv[1]]() else 1)
