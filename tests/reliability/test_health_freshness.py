"""Issue 36 item 6 and issue 29 item 10: /health counts freshness (a worker heartbeat, the last good round,
each source's last success), not only errors."""

import re
from datetime import timedelta

import pytest
from django.utils import timezone

from scheduling.models import Orchestrator, TaskStat

pytestmark = pytest.mark.django_db
HEARTBEAT, ROUND = "scheduling.tasks.heartbeat", "scheduling.tasks.run_round"


def _beat(name: str, seconds_ago: float, failed: bool = False) -> None:
    at = timezone.now() - timedelta(seconds=seconds_ago)
    TaskStat.objects.update_or_create(
        name=name, defaults={"succeeded": 5, "last_finished_at": at, "last_failed_at": at if failed else None}
    )


def _fresh_source(orchestrator, seconds_ago: float) -> None:
    Orchestrator.objects.filter(pk=orchestrator.pk).update(
        last_success_at=timezone.now() - timedelta(seconds=seconds_ago), last_error="", last_error_at=None
    )


def _health(client, cast):
    client.force_login(cast["admin"])
    response = client.get("/health")
    return response.status_code, response.json()["checks"]


def test_health_is_ok_while_the_worker_beats_and_rounds_run(client, cast, orchestrator):
    _beat(HEARTBEAT, 10)
    _beat(ROUND, 20)
    _fresh_source(orchestrator, 20)
    status, checks = _health(client, cast)
    assert checks["worker"] == "ok" and checks["rounds"] == "ok"
    assert checks["orchestrators"]["slurm-a"]["stale"] is False
    assert status == (200 if checks["broker"] == "ok" else 503)


def test_a_silent_worker_makes_health_503_naming_the_heartbeats_age(client, cast, orchestrator):
    _beat(HEARTBEAT, 300)  # the worker stopped five minutes ago
    _beat(ROUND, 300)
    status, checks = _health(client, cast)
    assert status == 503
    # 300 s, or a second more on a slow machine
    assert re.fullmatch(r"stale: last heartbeat 30[01] s ago \(limit 120 s\)", checks["worker"])
    assert re.match(r"stale: last successful round 30[01] s ago", checks["rounds"])
    client.logout()
    assert client.get("/health").json()["checks"]["worker"] == "degraded"  # anonymous: one word


def test_a_round_that_failed_last_is_reported(client, cast):
    _beat(HEARTBEAT, 5)
    _beat(ROUND, 5, failed=True)
    status, checks = _health(client, cast)
    assert status == 503 and checks["rounds"].startswith("failing: the last round failed")


def test_a_source_with_no_success_for_25_minutes_is_stale_though_nothing_recorded_an_error(client, cast, orchestrator):
    _beat(HEARTBEAT, 5)
    _fresh_source(orchestrator, 25 * 60)
    _, checks = _health(client, cast)
    assert checks["orchestrators"]["slurm-a"]["stale"] is True
    client.logout()
    assert client.get("/health").json()["checks"]["orchestrators"] == "degraded"


def test_a_worker_never_seen_fails_nothing(client, cast):
    status, checks = _health(client, cast)  # a fresh install, or a test database
    assert checks["worker"] == "not seen yet" and checks["rounds"] == "not seen yet"
    assert status == (200 if checks["broker"] == "ok" else 503)
