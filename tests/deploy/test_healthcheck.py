"""deploy/docker/healthcheck.py, the image's probe, against a real HTTP server on a free loopback port and
real schedule files (the worker probe needs a broker: the compose stack exercises it)."""

import http.server
import importlib.util
import os
import threading
import time
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "deploy" / "docker" / "healthcheck.py"
spec = importlib.util.spec_from_file_location("gpuportal_healthcheck", SCRIPT)
assert spec is not None and spec.loader is not None
healthcheck = importlib.util.module_from_spec(spec)
spec.loader.exec_module(healthcheck)


def serve(status: int):
    seen: list[dict[str, str]] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            seen.append({"path": self.path, **dict(self.headers)})
            self.send_response(status)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, seen


@pytest.mark.parametrize(("status", "healthy"), [(200, True), (503, False), (301, False)])
def test_web_probe_is_healthy_only_on_200(monkeypatch, status, healthy):
    server, seen = serve(status)
    try:
        monkeypatch.setenv("PORT", str(server.server_address[1]))
        assert healthcheck.web() is healthy
    finally:
        server.shutdown()
    assert seen[0]["path"] == "/health"
    assert seen[0]["Host"] == "localhost" and seen[0]["X-Forwarded-Proto"] == "https"


def test_web_probe_is_unhealthy_when_nothing_listens(monkeypatch):
    server, _ = serve(200)
    port = server.server_address[1]
    server.shutdown()
    server.server_close()
    monkeypatch.setenv("PORT", str(port))
    assert healthcheck.web() is False


def test_beat_probe_wants_a_recently_written_schedule(monkeypatch, tmp_path):
    monkeypatch.setenv("GPUPORTAL_VAR_DIR", str(tmp_path))
    assert healthcheck.beat() is False  # no schedule yet
    schedule = tmp_path / "celerybeat-schedule.db"  # dbm may add a suffix
    schedule.write_bytes(b"")
    assert healthcheck.beat() is True
    old = time.time() - 901
    os.utime(schedule, (old, old))
    assert healthcheck.beat() is False
