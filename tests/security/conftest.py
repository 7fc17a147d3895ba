"""Fixtures of the security tests: private processes for the fault tests (tests/security/processes.py, ended
in finalizers) and a server that repeats the credentials it was sent."""

import http.server
import threading

import pytest
from celery import Celery
from django.db import connections

from tests.api.conftest import stored_report  # noqa: F401 - a stored weekly report with empty sections
from tests.planning.conftest import k8s, recorded  # noqa: F401  (two weeks of recorded work for what-ifs)
from tests.rebalance.conftest import federation, inference_floor  # noqa: F401 - the rebalancer's small federation
from tests.support import require, require_postgres

from . import processes


@pytest.fixture
def private_redis():
    require(processes.redis_binary() is not None, "needs redis-server on PATH (apt-get install redis-server)")
    server = processes.start_redis()
    yield server
    server.stop()


@pytest.fixture
def private_postgres():
    require(processes.postgres_bin() is not None, "needs PostgreSQL server binaries in /usr/lib/postgresql/*/bin")
    server = processes.start_postgres()
    try:
        processes.migrate(server.url)
        yield server
    finally:
        server.remove()


@pytest.fixture
def private_database(transactional_db, private_postgres):
    """This process's default connection points at the private server for the test: the fixtures that come
    after it in a test's arguments write their rows there, where the private worker reads them."""
    require_postgres()
    connection = connections["default"]
    saved = dict(connection.settings_dict)
    connection.close()
    connection.settings_dict.update(
        NAME="gpuportal", USER="postgres", PASSWORD="", HOST="127.0.0.1", PORT=str(private_postgres.port)
    )
    yield private_postgres
    connection.close()
    connection.settings_dict.clear()
    connection.settings_dict.update(saved)


@pytest.fixture
def portal_broker(settings, monkeypatch):
    """Point the portal's own Celery app (what the views enqueue with) at a broker URL for one test."""
    from celery import _state

    from gpuportal.celery import app

    saved = (app.conf.broker_url, app.conf.broker_transport_options, app.conf.task_always_eager)
    # shared_task resolves through the current app: another test's probe app may have become it.
    previous = _state.get_current_app()

    def use(url: str, transport_options: dict) -> None:
        settings.CELERY_BROKER_URL = url
        monkeypatch.setenv("CELERY_BROKER_URL", url)  # Celery reads this before its own configuration
        app.conf.broker_url, app.conf.broker_transport_options = url, transport_options
        app.conf.task_always_eager = False  # an earlier test may have left eager mode on: publish for real
        app._pool, app.amqp._producer_pool = None, None
        app.set_current()

    yield use
    previous.set_current()
    app.conf.broker_url, app.conf.broker_transport_options, app.conf.task_always_eager = saved
    app._pool, app.amqp._producer_pool = None, None


@pytest.fixture
def producer(private_redis, monkeypatch):
    """A Celery client of the private Redis, apart from the portal's app (which stays as configured): sends
    tasks by name and reads their results there."""
    monkeypatch.setenv("CELERY_BROKER_URL", private_redis.url)  # Celery's env var beats the broker argument
    monkeypatch.setenv("CELERY_RESULT_BACKEND", private_redis.url)
    app = Celery("fault-probe", broker=private_redis.url, backend=private_redis.url, set_as_current=False)
    yield app
    app.close()


@pytest.fixture
def workers():
    """Start private workers with ``workers.start(...)``; every one still running is ended afterwards."""
    started = []

    class Workers:
        def start(self, **kwargs):
            worker = processes.start_worker(**kwargs)
            started.append(worker)
            return worker

    yield Workers()
    for worker in started:
        worker.stop()


class EchoCredentials(http.server.BaseHTTPRequestHandler):
    """Answers 401 and quotes the token it received, as a careless orchestrator's error page might."""

    received: list[str]

    def do_GET(self):
        token = self.headers.get("X-SLURM-USER-TOKEN") or self.headers.get("Authorization") or ""
        self.received.append(token)
        body = f"invalid token {token!r}".encode()
        self.send_response(401)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def echo_server():
    """(URL, the tokens received so far) of a real HTTP server on a free port."""
    received: list[str] = []
    handler = type("Handler", (EchoCredentials,), {"received": received})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", received
    server.shutdown()
    server.server_close()


@pytest.fixture
def credentials_dir(tmp_path, settings):
    """A credentials directory the portal trusts, and nothing else."""
    trusted = tmp_path / "credentials"
    trusted.mkdir()
    settings.GPUPORTAL_CREDENTIALS_DIRS = [str(trusted)]
    return trusted
