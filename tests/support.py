"""Service availability for tests: skip with a reason on a newcomer's machine, fail in CI."""

import os
import socket

import pytest

IN_CI = os.environ.get("CI", "").lower() == "true"


def port_open(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=1):
            return True
    except OSError:
        return False


def require(condition: bool, reason: str) -> None:
    """Skip (outside CI) or fail (CI=true) when a real service the test needs is missing."""
    if condition:
        return
    if IN_CI:
        pytest.fail(f"CI=true but {reason}", pytrace=False)
    pytest.skip(reason)


def require_postgres() -> None:
    from django.db import connection

    require(connection.vendor == "postgresql", "needs PostgreSQL: set DATABASE_URL=postgres://... (make test-services)")


def redis_url() -> str:
    return os.environ.get("TEST_REDIS_URL", "redis://127.0.0.1:6379/15")


def require_redis() -> None:
    require(port_open("127.0.0.1", 6379), "needs Redis on 127.0.0.1:6379")


def active_grant(team, requester, gpus: int):
    """An approved request's grant for ``team``, active from a minute ago for a day (as approval leaves it)."""
    from datetime import timedelta

    from django.utils import timezone

    from scheduling.models import QuotaGrant, QuotaRequest

    now = timezone.now()
    request = QuotaRequest.objects.create(
        requester=requester,
        team=team,
        gpus=gpus,
        starts_at=now - timedelta(minutes=1),
        ends_at=now + timedelta(days=1),
        justification="ICML",
        state=QuotaRequest.State.APPROVED,
    )
    return QuotaGrant.objects.create(
        request=request,
        team=team,
        gpus=gpus,
        starts_at=request.starts_at,
        ends_at=request.ends_at,
        state=QuotaGrant.State.ACTIVE,
    )


def in_process_app():
    """A Celery app that runs fanned-out work here, one part after the other. An app built without a backend
    argument is not enough: Celery reads CELERY_RESULT_BACKEND from the environment, which worker fixtures set."""
    from celery import Celery

    app = Celery("in-process", set_as_current=False)
    app.conf.task_always_eager = True
    return app


def governance_round() -> dict:
    """One governance round as the CLI runs it (``governance --once --json``): the report per orchestrator."""
    import json
    from io import StringIO

    from django.core.management import call_command

    out = StringIO()
    call_command("governance", "--once", "--json", stdout=out)
    return json.loads(out.getvalue())


def set_queue(team, *, gpu_model: str = "", weight, guaranteed: int, burst_limit: int, by, reason: str):
    """One queue edited through the same door as the fair-share page (services.governance)."""
    from decimal import Decimal

    from scheduling.services.governance import QueueChange, apply_queue_changes

    change = QueueChange(team, gpu_model, Decimal(str(weight)), guaranteed, burst_limit)
    return apply_queue_changes([change], by=by, reason=reason)[0]
