"""/health tells the truth within its bounds when Redis hangs: a silent listener here (no service needed),
and a real SIGSTOPped redis-server in test_faults_processes.py. No test times anything: each asserts
that the answer is the bounded timeout, which only the configured timeouts can produce."""

import json
import os
import socket
import subprocess
import sys
import threading

import pytest
from django.core.cache import caches

from scheduling.services import health

pytestmark = pytest.mark.django_db


@pytest.fixture
def silent_redis_url():
    """A port whose connections the kernel accepts and nobody ever answers, as with a stopped Redis."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(64)
        yield f"redis://127.0.0.1:{sock.getsockname()[1]}/0"


@pytest.fixture
def probe(settings):
    """The error details of /health are for a monitoring probe (METRICS_TOKEN); anyone else gets one word."""
    settings.METRICS_TOKEN = "probe-token"
    return {"HTTP_AUTHORIZATION": "Bearer probe-token"}


def test_health_answers_503_with_a_broker_timeout_when_the_broker_accepts_but_never_answers(
    client, settings, silent_redis_url, probe
):
    settings.CELERY_BROKER_URL = silent_redis_url
    response = client.get("/health", **probe)
    body = response.json()
    assert response.status_code == 503 and body["status"] == "error"
    assert body["checks"]["broker"].startswith(f"timeout: no answer within {health.SOCKET_TIMEOUT_S:g} s")
    assert body["checks"]["database"] == "ok"


def test_health_reports_a_silent_redis_cache_as_a_timeout_without_failing(client, settings, silent_redis_url, probe):
    settings.CACHES = {
        "default": {
            "BACKEND": "gpuportal.cache.RedisCache",
            "LOCATION": silent_redis_url,
            "OPTIONS": {"socket_connect_timeout": 0.5, "socket_timeout": 0.5},
        }
    }
    try:
        response = client.get("/health", **probe)
    finally:
        caches["default"].close()
    body = response.json()
    assert body["checks"]["cache"].startswith("timeout: no answer within")
    assert response.status_code == (200 if body["checks"]["broker"] == "ok" else 503)  # the cache is optional


def test_a_refused_broker_is_reported_down_naming_the_error(client, settings, probe):
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    settings.CELERY_BROKER_URL = f"redis://127.0.0.1:{port}/0"
    body = client.get("/health", **probe).json()
    assert body["checks"]["broker"].startswith("down: ConnectionError")


def test_a_check_that_has_not_answered_by_the_deadline_is_reported_as_a_timeout_and_the_others_still_are():
    hung = threading.Event()
    collect = health.start({"hung": lambda: "ok" if hung.wait(10) else "never", "quick": lambda: "ok"}, timeout=0.2)
    try:
        assert collect() == {"hung": "timeout: no answer within 0.2 s", "quick": "ok"}
    finally:
        hung.set()


def _production_database_options() -> dict:
    """The OPTIONS gpuportal/settings.py gives a PostgreSQL DATABASE_URL, read in a fresh interpreter."""
    code = "import json; from gpuportal import settings; print(json.dumps(settings.DATABASES['default']['OPTIONS']))"
    env = {**os.environ, "DATABASE_URL": "postgres://postgres@127.0.0.1:5432/x", "SECRET_KEY": "x", "DEBUG": "0"}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_database_that_accepts_but_never_answers_fails_the_connection_instead_of_hanging(silent_redis_url):
    """settings give PostgreSQL a connect_timeout (DATABASE_CONNECT_TIMEOUT_S): a stopped server is an error,
    not a request (or /health) hanging on the kernel's TCP timeouts."""
    import psycopg

    options = _production_database_options()
    assert options["connect_timeout"] > 0
    port = int(silent_redis_url.rsplit(":", 1)[1].split("/")[0])  # the same silent listener
    outcome: list[BaseException] = []

    def connect() -> None:
        try:
            psycopg.connect(host="127.0.0.1", port=port, user="postgres", dbname="x", **options)
        except BaseException as error:
            outcome.append(error)

    worker = threading.Thread(target=connect, daemon=True)
    worker.start()
    worker.join(60)
    assert not worker.is_alive() and isinstance(outcome[0], psycopg.OperationalError)
