"""Issue 16, what anonymous visitors get: the API schema and docs and /metrics (per-team usage) need a
signed-in user (metrics: an admin or the METRICS_TOKEN bearer) unless a setting opens them; gunicorn does
not announce itself in a Server header."""

import http.client
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ("/api/schema/", "/api/docs/", "/api/redoc/")
pytestmark = pytest.mark.django_db


def test_the_schema_and_both_docs_pages_need_a_signed_in_user(client, cast):
    assert client.get("/api/schema/").status_code in (401, 403)
    for page in ("/api/docs/", "/api/redoc/"):
        answer = client.get(page)
        assert answer.status_code == 302 and answer["Location"].startswith(f"/accounts/login/?next={page}")
    client.force_login(cast["researcher"])
    assert all(client.get(path).status_code == 200 for path in DOCS)
    swagger = client.get("/api/docs/").content.decode()
    assert "/api/docs/?script=" in swagger and "<script>" not in swagger  # its start-up code is a file


def test_a_setting_opens_the_schema_and_docs_to_everyone(client, settings):
    settings.GPUPORTAL_PUBLIC_API_DOCS = True
    assert [client.get(path).status_code for path in DOCS] == [200, 200, 200]


def test_metrics_need_an_admin_or_the_token_unless_a_setting_opens_them(client, cast, settings, fleet):
    settings.METRICS_TOKEN = "scrape-token"
    assert client.get("/metrics").status_code == 403
    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer wrong").status_code == 403
    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer tökén").status_code == 403  # not a 500
    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer scrape-token").status_code == 200
    client.force_login(cast["researcher"])
    assert client.get("/metrics").status_code == 403
    client.force_login(cast["admin"])
    assert "gpuportal_pool_gpus" in client.get("/metrics").content.decode()
    client.logout()
    settings.GPUPORTAL_PUBLIC_METRICS = True
    assert client.get("/metrics").status_code == 200


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _headers_from_gunicorn(config: str) -> list[dict[str, str]]:
    """Start gunicorn with ``config`` on a free port; the headers of a static file and of a Django page."""
    port = _free_port()
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "gpuportal.settings_test", "PYTHONUNBUFFERED": "1"}
    server = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "-c", config, "gpuportal.wsgi", "-b", f"127.0.0.1:{port}", "-w", "1"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        paths = ("/static/css/portal.css", "/accounts/login/")
        return [dict(_get(server, port, path).getheaders()) for path in paths]
    finally:
        server.terminate()
        server.wait(timeout=30)


def _get(server: subprocess.Popen, port: int, path: str) -> http.client.HTTPResponse:
    for _attempt in range(600):  # until the worker answers (a loaded machine may take a while)
        if server.poll() is not None:
            raise AssertionError(f"gunicorn exited: {server.stderr.read().decode()[-2000:]}")
        try:
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            connection.request("GET", path)
            response = connection.getresponse()
            response.read()
            return response
        except (ConnectionRefusedError, http.client.RemoteDisconnected):
            time.sleep(0.1)
    raise AssertionError(f"gunicorn never answered on port {port}")


def test_gunicorn_with_the_projects_config_sends_no_server_header():
    bare = _headers_from_gunicorn("/dev/null")
    assert bare[0]["Server"] == "gunicorn", "without the config gunicorn names itself"
    for headers in _headers_from_gunicorn("gunicorn.conf.py"):
        assert "Server" not in headers and "server" not in {k.lower() for k in headers}, headers
