"""Real PostgreSQL and a real Celery worker on Redis (skipped with a reason outside CI when absent)."""

import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path

import pytest
from django.db import connection, connections
from django.utils import timezone

from scheduling.models import CapacityLock, QuotaGrant, QuotaRequest
from scheduling.services import quota
from tests.support import redis_url, require_postgres, require_redis

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]
ROOT = Path(__file__).resolve().parents[2]


def _submitted(cast, teams, gpus, period, who="researcher", team="nlp"):
    start, end = period
    return quota.create_request(
        requester=cast[who], team=teams[team], gpus=gpus, starts_at=start, ends_at=end, justification="concurrency"
    )


@pytest.fixture
def slow_capacity_check(monkeypatch):
    """Widen the race window: without the lock both connections would read the promises before either writes."""
    require_postgres()
    real_check = quota.check_new_promise

    def slow_check(*args, **kwargs):
        check = real_check(*args, **kwargs)
        time.sleep(0.5)
        return check

    monkeypatch.setattr(quota, "check_new_promise", slow_check)


def test_two_admins_approving_at_once_cannot_overcommit(
    cast, teams, queues, period, django_user_model, slow_capacity_check
):
    # 64 GPUs with 40 guaranteed leave 24: each request fits alone, both together do not.
    first = _submitted(cast, teams, 16, period)
    second = _submitted(cast, teams, 16, period, who="outsider", team="production")  # another team: no shared row
    second_admin = django_user_model.objects.create_user("bea", password="pw", is_staff=True, is_superuser=True)
    CapacityLock.objects.create(scope="quota")  # as after any earlier approval: only the row lock serialises
    outcomes = _approve_at_once([(first.pk, cast["admin"]), (second.pk, second_admin)])
    assert sorted(outcomes) == ["ValidationError", "approved"]
    assert QuotaGrant.objects.count() == 1
    assert QuotaRequest.objects.filter(state=QuotaRequest.State.SUBMITTED).count() == 1


def test_two_admins_approving_different_models_at_once_cannot_overcommit_the_fleet(
    cast, teams, demo_like_fleet, period, django_user_model, slow_capacity_check
):
    # 287 of 320 GPUs are guaranteed to any model: 20 any-model and 20 A100 each fit alone, not together.
    any_model = _submitted(cast, teams, 20, period)
    a100 = _submitted(cast, teams, 20, period, who="outsider", team="production")
    QuotaRequest.objects.filter(pk=a100.pk).update(gpu_model="A100")
    second_admin = django_user_model.objects.create_user("bea", password="pw", is_staff=True, is_superuser=True)
    CapacityLock.objects.create(scope="quota")
    outcomes = _approve_at_once([(any_model.pk, cast["admin"]), (a100.pk, second_admin)])
    assert sorted(outcomes) == ["ValidationError", "approved"]
    assert QuotaGrant.objects.count() == 1


def _approve_at_once(decisions) -> list[str]:
    """Each (request id, admin) approves on its own connection, all released together."""
    barrier, outcomes = threading.Barrier(len(decisions)), []

    def approve(request_id, admin):
        try:
            barrier.wait(timeout=10)
            quota.approve_request(request_id, by=admin)
            outcomes.append("approved")
        except Exception as error:
            outcomes.append(type(error).__name__)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=approve, args=decision) for decision in decisions]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    return outcomes


@contextmanager
def celery_worker(
    broker: str, backend: str | None = None, *, pool: tuple[str, ...] = ("--pool=solo",), env: dict | None = None
) -> Iterator[subprocess.Popen]:
    """A real `celery worker` process on ``broker``, reading the test database (PostgreSQL: an in-memory SQLite
    test database is not visible to another process); ``pool``: its pool and queue arguments, ``env`` added to
    its environment."""
    require_postgres()
    db = connection.settings_dict
    env = {
        **os.environ,
        **(env or {}),
        "DJANGO_SETTINGS_MODULE": "gpuportal.settings_test",
        "DATABASE_URL": f"postgres://{db['USER']}@{db['HOST']}:{db['PORT'] or 5432}/{db['NAME']}",
        "CELERY_BROKER_URL": broker,
        "CELERY_RESULT_BACKEND": backend or "",
    }
    argv = [sys.executable, "-m", "celery", "-A", "gpuportal", "worker", *pool, "--loglevel=WARNING"]
    argv += ["--without-heartbeat", "--without-gossip", "--without-mingle"]
    process = subprocess.Popen(argv, cwd=ROOT, env=env)
    try:
        yield process
    finally:
        process.terminate()
        process.wait(timeout=20)


@pytest.fixture
def worker(monkeypatch):
    """A real `celery worker` process on Redis, reading the test database."""
    require_redis()
    from celery import Celery

    with celery_worker(redis_url(), redis_url()):
        # Celery lets CELERY_BROKER_URL in the environment override an app's broker argument (CI sets it).
        monkeypatch.setenv("CELERY_BROKER_URL", redis_url())
        monkeypatch.setenv("CELERY_RESULT_BACKEND", redis_url())
        # its own app, never made current: the portal's stays the one services publish through
        producer = Celery("worker-probe", broker=redis_url(), backend=redis_url(), set_as_current=False)
        yield producer
        producer.close()


def test_a_real_worker_activates_due_grants_end_to_end(worker, cast, teams, queues):
    start = timezone.now() + timedelta(seconds=1)
    request = _submitted(cast, teams, 4, (start, start + timedelta(days=2)))
    grant = quota.approve_request(request.pk, by=cast["lead"], now=start - timedelta(seconds=1))
    assert grant.state == QuotaGrant.State.SCHEDULED
    assert worker.send_task("scheduling.tasks.ping", args=[41]).get(timeout=120) == 42
    # The grant is due one second after it was filed; a warm worker answers sooner than that.
    time.sleep(max((start - timezone.now()).total_seconds(), 0) + 0.1)
    counts = worker.send_task("scheduling.tasks.expire_grants").get(timeout=120)
    grant.refresh_from_db()
    assert counts["activated"] == 1 and grant.state == QuotaGrant.State.ACTIVE
