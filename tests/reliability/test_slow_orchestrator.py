"""Issue 36, High 1: a byte-trickling orchestrator cannot hold a worker; leases belong to their holder;
scrapes have their own queue and time limit."""

import time
from datetime import timedelta

import httpx
import pytest
from django.conf import settings
from django.core.exceptions import ValidationError
from django.test import override_settings
from django.utils import timezone

from gpuportal.celery import app
from scheduling import tasks  # noqa: F401  (registers the tasks with the app)
from scheduling.collectors.errors import SourceUnavailable
from scheduling.collectors.httpjson import JsonClient
from scheduling.collectors.reliability import NO_RETRY
from scheduling.models import Orchestrator
from scheduling.services.collection import acquire_lease, register_orchestrator, scrape

from .trickle import trickling_server


@pytest.mark.parametrize("mode", ["body", "headers"])
def test_a_call_to_a_trickling_endpoint_ends_at_its_total_deadline(mode):
    with trickling_server(mode=mode, interval=0.2, lasts=15) as url:
        client = JsonClient(url, name="slow", timeout=1.0, deadline=1.5, retry=NO_RETRY)
        started = time.monotonic()
        with pytest.raises(SourceUnavailable, match=r"total deadline of 1\.5 s passed"):
            client.get_json("/api/nodes")
        took = time.monotonic() - started
    # Each byte came within the 1 s read timeout: only the total deadline could stop it.
    assert 1.4 < took < 3.0


def test_nested_deadlines_keep_the_earliest():
    from scheduling.collectors.deadline import total_deadline

    with trickling_server(interval=0.2, lasts=15) as url:
        client = JsonClient(url, name="slow", timeout=1.0, deadline=30, retry=NO_RETRY)
        started = time.monotonic()
        with total_deadline(1.0), pytest.raises(SourceUnavailable):
            client.get_json("/")
        assert time.monotonic() - started < 2.5


def test_the_deadline_transport_still_wraps_httpxs_connection_pool():
    # deadline_transport reaches into httpx's pool: this fails loudly if an httpx upgrade moves it.
    from scheduling.collectors.deadline import deadline_transport, total_deadline

    transport = deadline_transport()
    assert type(transport._pool._network_backend).__name__ == "_DeadlineBackend"
    with httpx.Client(transport=transport) as client, total_deadline(5), pytest.raises(httpx.ConnectError):
        client.get("http://127.0.0.1:9/")


@pytest.mark.django_db
@override_settings(GPUPORTAL_SCRAPE_DEADLINE_S=2.0)
def test_a_scrape_of_a_trickling_source_ends_in_seconds_and_marks_it_stale():
    with trickling_server(interval=0.2, lasts=20) as url:
        orchestrator, _ = register_orchestrator(kind="ray", name="ray-slow", url=url)
        started = time.monotonic()
        outcome = scrape(orchestrator.pk)
        took = time.monotonic() - started
    orchestrator.refresh_from_db()
    assert took < 6.0  # on main: the 20 s trickle ran to its end and the scrape "succeeded"
    assert outcome.run is not None and not outcome.run.ok
    assert orchestrator.is_stale and "deadline" in orchestrator.last_error
    assert orchestrator.lease_until is None and orchestrator.lease_token == ""


@pytest.mark.django_db
def test_a_lease_outlives_the_scrape_tasks_time_limit(orchestrator):
    before = timezone.now()
    assert acquire_lease(orchestrator.pk)
    orchestrator.refresh_from_db()
    assert orchestrator.lease_until - before > timedelta(seconds=settings.GPUPORTAL_TASK_TIME_LIMITS["scrape"])


@pytest.mark.django_db
def test_a_scrape_whose_lease_was_taken_over_does_not_release_the_new_holders_lease(orchestrator):
    from scheduling.services.collection import release_lease

    first = acquire_lease(orchestrator.pk)
    # The first holder's lease ran out (say, a hung call); a second scrape takes the source over.
    Orchestrator.objects.filter(pk=orchestrator.pk).update(lease_until=timezone.now() - timedelta(seconds=1))
    second = acquire_lease(orchestrator.pk)
    assert first and second and first != second
    assert not release_lease(orchestrator.pk, first, breaker_state={"consecutive_failures": 9})
    orchestrator.refresh_from_db()
    assert orchestrator.lease_token == second and orchestrator.lease_until is not None
    assert orchestrator.breaker_state.get("consecutive_failures") != 9  # the stale holder wrote nothing
    assert acquire_lease(orchestrator.pk) is None  # still held: no third scrape starts
    assert release_lease(orchestrator.pk, second)
    assert acquire_lease(orchestrator.pk)


def test_scrapes_have_their_own_queue_and_time_limit_and_nothing_else_shares_it():
    route = app.amqp.router.route({}, "scheduling.tasks.scrape_orchestrator")
    assert route["queue"].name == settings.GPUPORTAL_COLLECT_QUEUE == "collect"
    for other in ("run_round", "reconcile_governance", "reap_stale_work", "run_whatif", "build_requested_report"):
        assert app.amqp.router.route({}, f"scheduling.tasks.{other}")["queue"].name != "collect"
    task = app.tasks["scheduling.tasks.scrape_orchestrator"]
    assert task.time_limit == settings.GPUPORTAL_TASK_TIME_LIMITS["scrape"]
    assert task.soft_time_limit > settings.GPUPORTAL_SCRAPE_DEADLINE_S


@pytest.mark.django_db
def test_each_orchestrator_may_have_its_own_scrape_limits_and_the_default_stays_todays():
    from scheduling.services.collection import lease_length, scrape_limits

    default, _ = register_orchestrator(kind="ray", name="ray-default", url="http://ray.example:8265")
    limits = scrape_limits(default)
    assert (limits.hard_s, limits.soft_s, limits.http_s) == (
        settings.GPUPORTAL_TASK_TIME_LIMITS["scrape"], settings.GPUPORTAL_TASK_TIME_LIMITS["scrape"] - 60,
        settings.GPUPORTAL_SCRAPE_DEADLINE_S,
    )
    long, _ = register_orchestrator(
        kind="slurm", name="slurm-far", url="http://far.example:6820", options={"scrape_time_limit_s": 900}
    )
    far = scrape_limits(long)
    assert (far.hard_s, far.soft_s, far.http_s) == (900, 840, settings.GPUPORTAL_SCRAPE_DEADLINE_S)
    assert lease_length(far) > timedelta(seconds=900)  # the lease outlives this source's own hard limit
    with pytest.raises(ValidationError) as refused:
        register_orchestrator(kind="ray", name="ray-odd", url="http://ray.example:8265",
                              options={"scrape_time_limit_s": 1})
    assert "scrape_time_limit_s" in str(refused.value.message_dict["options"])
