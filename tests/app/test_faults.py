"""Faults with real parts: a killed database connection mid-approval, a broker outage, a hanging source."""

import http.server
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest
from django.db import connection, connections
from django.test import Client

from scheduling.models import Orchestrator, QuotaGrant, QuotaRequest
from scheduling.services import collection, quota
from tests.security.processes import free_port
from tests.support import port_open, require, require_postgres

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]
ROOT = Path(__file__).resolve().parents[2]


def test_an_approval_cut_off_by_the_database_either_happened_or_not(cast, teams, queues, period, monkeypatch):
    require_postgres()
    start, end = period
    request = quota.create_request(
        requester=cast["researcher"], team=teams["nlp"], gpus=8, starts_at=start, ends_at=end, justification="fault"
    )
    inside, outcome = threading.Event(), {}
    real_check = quota.check_new_promise

    def check_then_wait(*args, **kwargs):
        outcome["pid"] = connection.connection.info.backend_pid
        inside.set()
        time.sleep(1.5)  # the server kills this connection meanwhile, as a restart would
        return real_check(*args, **kwargs)

    monkeypatch.setattr(quota, "check_new_promise", check_then_wait)

    def approve():
        try:
            quota.approve_request(request.pk, by=cast["lead"])
            outcome["result"] = "approved"
        except Exception as error:
            outcome["result"] = type(error).__name__
        finally:
            connections.close_all()

    worker = threading.Thread(target=approve)
    worker.start()
    assert inside.wait(10)
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_terminate_backend(%s)", [outcome["pid"]])
    worker.join(20)
    assert outcome["result"] in ("OperationalError", "InterfaceError")
    request.refresh_from_db()
    assert request.state == QuotaRequest.State.SUBMITTED and not QuotaGrant.objects.exists()
    monkeypatch.setattr(quota, "check_new_promise", real_check)
    quota.approve_request(request.pk, by=cast["lead"])  # a retry after the outage succeeds exactly once
    assert QuotaGrant.objects.count() == 1


class _Hanging(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        time.sleep(3)

    def log_message(self, *args):
        pass


class _Garbage(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(b'{"result": true, "data": {"result": {"total": 3, "result": [{"node_id": ')

    def log_message(self, *args):
        pass


@pytest.fixture
def bad_servers():
    servers = [http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler) for handler in (_Hanging, _Garbage)]
    for server in servers:
        threading.Thread(target=server.serve_forever, daemon=True).start()
    yield [f"http://127.0.0.1:{s.server_address[1]}" for s in servers]
    for server in servers:
        server.shutdown()


def test_a_hanging_or_garbled_source_goes_stale_while_others_keep_flowing(bad_servers, settings):
    from scheduling.services import demo

    demo.create_demo_federation()
    demo.run_demo_round()
    hanging, _ = collection.register_orchestrator(
        kind="ray", name="ray-hang", url=bad_servers[0], options={"timeout_s": 0.5}
    )
    garbled, _ = collection.register_orchestrator(kind="ray", name="ray-garbled", url=bad_servers[1])
    for orchestrator in (hanging, garbled):
        collection.scrape(orchestrator.pk)
    before = Orchestrator.objects.get(name="slurm-hpc").last_success_at
    demo.run_demo_round()
    for name in ("ray-hang", "ray-garbled"):
        assert Orchestrator.objects.get(name=name).is_stale
    assert Orchestrator.objects.get(name="slurm-hpc").last_success_at > before
    assert not Orchestrator.objects.get(name="slurm-hpc").is_stale


@pytest.fixture
def private_redis():
    """A Redis of our own with an append-only file, so it can be stopped and restarted with its queue."""
    binary = shutil.which("redis-server")
    require(binary is not None, "needs redis-server on PATH")
    workdir = tempfile.mkdtemp(prefix="gpuportal-redis-")
    port = free_port()  # never a fixed port: other runs share this machine
    argv = [
        binary,
        "--port",
        str(port),
        "--bind",
        "127.0.0.1",
        "--dir",
        workdir,
        "--appendonly",
        "yes",
        "--appendfsync",
        "always",
        "--save",
        "",
    ]

    def start():
        process = subprocess.Popen(argv, stdout=subprocess.DEVNULL)
        for _ in range(50):
            if port_open("127.0.0.1", port):
                return process
            time.sleep(0.1)
        raise RuntimeError("private redis did not start")

    state = {"process": start()}
    url = f"redis://127.0.0.1:{port}/0"

    def stop():
        state["process"].terminate()
        state["process"].wait(10)

    yield url, stop, lambda: state.update(process=start())
    stop()
    shutil.rmtree(workdir, ignore_errors=True)


def test_pages_render_while_the_broker_is_down_and_queued_tasks_run_when_it_returns(
    private_redis, cast, queues, settings, monkeypatch
):
    require_postgres()
    url, stop, restart = private_redis
    settings.CELERY_BROKER_URL = url
    from celery import Celery

    monkeypatch.setenv("CELERY_BROKER_URL", url)  # Celery's env var would override the broker argument
    monkeypatch.setenv("CELERY_RESULT_BACKEND", url)
    # its own app, never made current: the portal's stays the one services publish through
    producer = Celery("fault-probe", broker=url, backend=url, set_as_current=False)
    results = [producer.send_task("scheduling.tasks.ping", args=[n]) for n in range(3)]  # no worker yet
    stop()
    client = Client()
    client.force_login(cast["researcher"])
    assert client.get("/").status_code == 200
    health = client.get("/health")
    assert health.status_code == 503 and health.json()["checks"]["broker"] == "degraded"  # details: admins only
    restart()
    db = connection.settings_dict
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "gpuportal.settings_test",
        "CELERY_BROKER_URL": url,
        "CELERY_RESULT_BACKEND": url,
        "DATABASE_URL": f"postgres://{db['USER']}@{db['HOST']}:{db['PORT'] or 5432}/{db['NAME']}",
    }
    worker = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "gpuportal",
            "worker",
            "--pool=solo",
            "--loglevel=WARNING",
            "--without-gossip",
            "--without-mingle",
        ],
        cwd=ROOT,
        env=env,
    )
    try:
        assert [r.get(timeout=120) for r in results] == [1, 2, 3]
    finally:
        worker.terminate()
        worker.wait(20)
        producer.close()
