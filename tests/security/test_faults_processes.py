"""Faults with real processes of our own, on free ports: a private PostgreSQL stopped mid-run, a private
Redis refused or SIGSTOPped, a real Celery worker SIGKILLed mid-run (tests/security/processes.py).

Bounded and self-cleaning: every wait has a limit, every process is ended in a fixture finalizer.
"""

import pytest
from django.db import connection
from django.test import Client

from scheduling.models import WhatIfScenario
from scheduling.services import whatif

from .processes import wait_for

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]
INPUTS = {"weeks": 2, "fleet": [{"gpu_model": "H100", "nodes": -4}]}
FAST_RECOVERY = {  # what the worker under test is told, so recovery takes seconds instead of an hour
    "CELERY_VISIBILITY_TIMEOUT_S": "3",
    "CELERY_UNACKED_RESTORE_INTERVAL_S": "1",
}


def _status(pk: int) -> str:
    return WhatIfScenario.objects.values_list("status", flat=True).get(pk=pk)


def _submit(cast, teams, producer) -> WhatIfScenario:
    def enqueue(pk: int) -> None:
        producer.send_task("scheduling.tasks.run_whatif", args=[pk])

    return whatif.submit(name="fault", raw_inputs=INPUTS, by=cast["lead"], team=teams["research"], enqueue=enqueue)


def test_a_sigstopped_redis_makes_health_answer_503_with_the_broker_timed_out(private_redis, settings):
    settings.CELERY_BROKER_URL = private_redis.url
    settings.METRICS_TOKEN = "probe-token"  # the error details are for a monitoring probe
    client = Client(HTTP_AUTHORIZATION="Bearer probe-token")
    assert client.get("/health").json()["checks"]["broker"] == "ok"
    private_redis.pause()
    try:
        response = client.get("/health")
    finally:
        private_redis.resume()
    assert response.status_code == 503 and response.json()["checks"]["broker"].startswith("timeout: no answer")
    assert client.get("/health").json()["checks"]["broker"] == "ok"  # and it recovers with Redis


def test_an_enqueue_refused_after_the_commit_answers_503_and_the_run_is_failed_not_queued(
    private_redis, portal_broker, cast, teams, recorded
):
    from knox.models import AuthToken
    from rest_framework.test import APIClient

    portal_broker(private_redis.url, {"socket_connect_timeout": 1.0, "socket_timeout": 2.0})
    private_redis.stop()  # the row commits; then the publish finds nobody
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {AuthToken.objects.create(cast['lead'])[1]}")
    response = api.post("/api/v1/whatif/", {"name": "api", "team": "research", "inputs": INPUTS}, format="json")
    assert response.status_code == 503 and "could not be queued" in response.json()["detail"]
    row = WhatIfScenario.objects.get()
    assert row.status == WhatIfScenario.Status.FAILED and "task broker did not answer" in row.error


def test_postgres_stopped_mid_run_leaves_the_run_failed_with_a_reason_once_the_reaper_runs(
    private_database, private_redis, producer, workers, tmp_path, cast, teams, recorded
):
    url = private_database.url
    # Any silence counts for the reaper here: the run has provably stopped (its task failed, below).
    reaper = {"GPUPORTAL_REAPER_RUNNING_AFTER_S": "0"}
    workers.start(database_url=url, broker_url=private_redis.url, gate=tmp_path, **FAST_RECOVERY, **reaper)
    scenario = _submit(cast, teams, producer)
    wait_for(lambda: (tmp_path / "paused").exists(), "the worker to be mid-run")
    assert _status(scenario.pk) == WhatIfScenario.Status.RUNNING
    connection.close()
    private_database.stop()  # every session ends, the worker's too
    (tmp_path / "release").touch()  # its next progress write finds no database
    wait_for(lambda: (tmp_path / "failed").exists(), "the running half to fail", timeout=60)
    assert (tmp_path / "failed").read_text() == "scheduling.tasks.run_whatif_half: OperationalError"
    private_database.start()
    assert _status(scenario.pk) == WhatIfScenario.Status.RUNNING  # orphaned: its message was acknowledged
    counts = producer.send_task("scheduling.tasks.reap_stale_work").get(timeout=60)
    assert counts["whatif"] == {"requeued": 0, "failed": 1}
    row = WhatIfScenario.objects.get(pk=scenario.pk)
    assert row.status == WhatIfScenario.Status.FAILED and row.error.startswith("Stopped without finishing")


def test_a_worker_killed_mid_run_has_its_message_redelivered_to_a_new_worker_which_completes_the_run(
    private_database, private_redis, producer, workers, tmp_path, cast, teams, recorded
):
    url = private_database.url
    first = workers.start(database_url=url, broker_url=private_redis.url, gate=tmp_path, **FAST_RECOVERY)
    scenario = _submit(cast, teams, producer)
    wait_for(lambda: (tmp_path / "paused").exists(), "the worker to be mid-run")
    first.kill()  # no acknowledgement: Redis keeps the message as unacked
    assert _status(scenario.pk) == WhatIfScenario.Status.RUNNING
    workers.start(database_url=url, broker_url=private_redis.url, **FAST_RECOVERY)
    wait_for(lambda: _status(scenario.pk) in ("done", "failed"), "the new worker to finish the run", timeout=120)
    row = WhatIfScenario.objects.get(pk=scenario.pk)
    assert row.status == WhatIfScenario.Status.DONE, row.error
    # The half's message was redelivered (the run itself was claimed once: its task had handed the halves out).
    assert row.attempts == 1 and row.results["scenario"]["capacity_gpus"] == 32
