"""What-if runs never stay queued or running forever: enqueue failures, duplicate and redelivered
messages, and the reaper (docs/operations.md, orphaned work)."""

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone
from kombu.exceptions import OperationalError

from scheduling.models import WhatIfScenario
from scheduling.services import whatif

INPUTS = {"weeks": 2, "fleet": [{"gpu_model": "H100", "nodes": -4}]}
LIMITS = {"queued_after_s": 900.0, "running_after_s": 4800.0, "plan_after_s": 1800.0}


def _refused(pk):
    raise OperationalError("Error 111 connecting to 127.0.0.1:6399. Connection refused.")


def _submitted(cast, teams, **kwargs) -> WhatIfScenario:
    return whatif.submit(name="orphan", raw_inputs=INPUTS, by=cast["lead"], team=teams["research"], **kwargs)


@pytest.mark.django_db(transaction=True)  # on_commit runs as in production: right after the commit
def test_an_api_post_whose_enqueue_fails_answers_503_and_leaves_the_run_failed_with_the_reason(
    cast, teams, recorded, monkeypatch
):
    from knox.models import AuthToken
    from rest_framework.test import APIClient

    from scheduling.api import planning

    monkeypatch.setattr(planning, "_enqueue", _refused)
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {AuthToken.objects.create(cast['lead'])[1]}")
    response = api.post("/api/v1/whatif/", {"name": "api", "team": "research", "inputs": INPUTS}, format="json")
    assert response.status_code == 503
    assert "could not be queued" in response.json()["detail"] and "Connection refused" in response.json()["detail"]
    row = WhatIfScenario.objects.get()
    assert row.status == WhatIfScenario.Status.FAILED and row.finished_at is not None
    assert row.error.startswith("The run could not be queued: the task broker did not answer (OperationalError")
    assert api.get(f"/api/v1/whatif/{row.pk}/").json()["error"] == row.error


@pytest.mark.django_db(transaction=True)
def test_a_form_post_whose_enqueue_fails_answers_503_with_the_reason_and_lists_the_failed_run(
    client, cast, teams, recorded, monkeypatch
):
    from scheduling.views import planning

    monkeypatch.setattr(planning, "_enqueue", _refused)
    client.force_login(cast["lead"])
    form = {
        "name": "grow",
        "team": teams["research"].pk,
        "weeks": 2,
        "seed": 0,
        "fleet_model": "H100",
        "fleet_nodes": 4,
    }
    response = client.post(reverse("whatif"), form)
    assert response.status_code == 503
    assert b'id="whatif-unavailable"' in response.content and b"Connection refused" in response.content
    assert WhatIfScenario.objects.get().status == WhatIfScenario.Status.FAILED


@pytest.mark.django_db
def test_a_second_delivery_of_a_run_another_worker_holds_does_not_run_it_again(cast, teams, recorded):
    scenario = _submitted(cast, teams)
    WhatIfScenario.objects.filter(pk=scenario.pk).update(status=WhatIfScenario.Status.RUNNING, attempts=1)
    row = whatif.run_scenario(scenario.pk)
    assert (row.status, row.attempts, row.results) == (WhatIfScenario.Status.RUNNING, 1, {})


@pytest.mark.django_db
def test_a_failed_run_is_not_started_by_a_late_message(cast, teams, recorded):
    scenario = _submitted(cast, teams)
    whatif.fail_run(scenario.pk, "Stopped without finishing")
    assert whatif.run_scenario(scenario.pk, take_over=True).status == WhatIfScenario.Status.FAILED


@pytest.mark.django_db
def test_a_redelivered_message_takes_over_the_run_its_dead_worker_left_running(cast, teams, recorded):
    scenario = _submitted(cast, teams)
    WhatIfScenario.objects.filter(pk=scenario.pk).update(status=WhatIfScenario.Status.RUNNING, attempts=1, progress=40)
    row = whatif.run_scenario(scenario.pk, take_over=True)
    assert (row.status, row.attempts, row.progress, row.error) == (WhatIfScenario.Status.DONE, 2, 100, "")


@pytest.mark.django_db
def test_a_run_that_kept_losing_its_worker_is_failed_instead_of_started_again(cast, teams, recorded, settings):
    settings.GPUPORTAL_REAPER = {**settings.GPUPORTAL_REAPER, "max_attempts": 2}
    scenario = _submitted(cast, teams)
    WhatIfScenario.objects.filter(pk=scenario.pk).update(status=WhatIfScenario.Status.RUNNING, attempts=2)
    row = whatif.run_scenario(scenario.pk, take_over=True)
    assert row.status == WhatIfScenario.Status.FAILED and row.results == {}
    assert "worker was lost mid-run 2 times; not started again" in row.error


@pytest.mark.django_db(transaction=True)  # the reaper runs in autocommit: its enqueue is not deferred
def test_the_reaper_queues_again_a_run_no_worker_started_then_fails_it_naming_why(cast, teams, recorded, settings):
    settings.GPUPORTAL_REAPER = {**settings.GPUPORTAL_REAPER, "max_attempts": 2}
    scenario = _submitted(cast, teams)
    sent, later = [], timezone.now() + timedelta(seconds=LIMITS["queued_after_s"] + 1)
    assert whatif.reap_stale(timezone.now(), enqueue=sent.append, limits=LIMITS) == {"requeued": 0, "failed": 0}
    assert whatif.reap_stale(later, enqueue=sent.append, limits=LIMITS) == {"requeued": 1, "failed": 0}
    row = WhatIfScenario.objects.get(pk=scenario.pk)
    assert sent == [scenario.pk] and row.status == WhatIfScenario.Status.QUEUED and row.requeues == 1
    assert "no worker had started it (queued 2 of 2)" in row.error
    assert whatif.reap_stale(later, enqueue=sent.append, limits=LIMITS)["requeued"] == 0  # heartbeat renewed
    last = later + timedelta(seconds=LIMITS["queued_after_s"] + 1)
    assert whatif.reap_stale(last, enqueue=sent.append, limits=LIMITS) == {"requeued": 0, "failed": 1}
    row.refresh_from_db()
    assert row.status == WhatIfScenario.Status.FAILED and "Is a Celery worker running?" in row.error


@pytest.mark.django_db
def test_the_reaper_fails_a_running_run_that_stopped_heartbeating_and_spares_a_live_one(cast, teams, recorded):
    silent, live = _submitted(cast, teams), _submitted(cast, teams)
    now = timezone.now()
    WhatIfScenario.objects.filter(pk=silent.pk).update(
        status=WhatIfScenario.Status.RUNNING, heartbeat_at=now - timedelta(seconds=LIMITS["running_after_s"] + 5)
    )
    WhatIfScenario.objects.filter(pk=live.pk).update(status=WhatIfScenario.Status.RUNNING, heartbeat_at=now)
    assert whatif.reap_stale(now, enqueue=_refused, limits=LIMITS) == {"requeued": 0, "failed": 1}
    silent.refresh_from_db()
    live.refresh_from_db()
    assert (
        silent.status == WhatIfScenario.Status.FAILED and "Stopped without finishing: no progress since" in silent.error
    )
    assert live.status == WhatIfScenario.Status.RUNNING


@pytest.mark.django_db(transaction=True)  # the reaper runs in autocommit: its enqueue is not deferred
def test_a_requeue_the_broker_refuses_fails_the_run_with_the_reason(cast, teams, recorded):
    scenario = _submitted(cast, teams)
    later = timezone.now() + timedelta(seconds=LIMITS["queued_after_s"] + 1)
    assert whatif.reap_stale(later, enqueue=_refused, limits=LIMITS) == {"requeued": 0, "failed": 1}
    scenario.refresh_from_db()
    assert scenario.status == WhatIfScenario.Status.FAILED and "Connection refused" in scenario.error


@pytest.mark.django_db
def test_a_run_heartbeats_while_the_simulator_advances(cast, teams, recorded):
    scenario = _submitted(cast, teams)
    WhatIfScenario.objects.filter(pk=scenario.pk).update(heartbeat_at=None)
    whatif._progress(scenario.pk, 0)(5, 10)
    row = WhatIfScenario.objects.get(pk=scenario.pk)
    assert row.progress == 25 and row.heartbeat_at is not None


def test_every_task_time_limit_ends_before_the_broker_would_hand_its_message_to_another_worker(settings):
    from gpuportal.celery import app
    from scheduling import tasks

    app.loader.import_default_modules()
    limits = [
        getattr(task, "time_limit", None) or app.conf.task_time_limit
        for task in vars(tasks).values()
        if hasattr(task, "delay")
    ]
    assert limits and app.conf.task_time_limit and max(limits) < settings.CELERY_VISIBILITY_TIMEOUT_S
    assert (
        tasks.run_whatif.time_limit == settings.GPUPORTAL_TASK_TIME_LIMITS["whatif"] > tasks.run_whatif.soft_time_limit
    )
    assert settings.GPUPORTAL_REAPER["running_after_s"] > settings.CELERY_VISIBILITY_TIMEOUT_S
    assert app.conf.task_acks_late and app.conf.task_reject_on_worker_lost and app.conf.task_publish_retry
