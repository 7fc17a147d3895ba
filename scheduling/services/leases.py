"""Leases that only their holder releases: a row's ``lease_until`` and ``lease_token`` (an orchestrator's
scrape, a kind of round). Taking one is a single conditional UPDATE, so two workers never both win; releasing
is compare-and-delete on the token, so a holder that outlived its lease never frees the lease of the worker
that took it over (issue 36, High 1 and Medium 10)."""

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta

from django.conf import settings
from django.db.models import Q, QuerySet
from django.utils import timezone

from scheduling.models import RoundLease


def outliving(task_limit: str) -> timedelta:
    """A lease that outlives a task's hard time limit (``GPUPORTAL_TASK_TIME_LIMITS[task_limit]``) by a minute: it
    cannot run out under a live holder, and frees itself soon after a killed one's task would have ended."""
    return timedelta(seconds=settings.GPUPORTAL_TASK_TIME_LIMITS[task_limit] + 60)


def acquire(row: QuerySet, length: timedelta) -> str | None:
    """The lease's token if this caller now holds the lease of ``row`` (a queryset of one row), else None."""
    now = timezone.now()
    free = Q(lease_until__isnull=True) | Q(lease_until__lt=now)
    token = uuid.uuid4().hex
    return token if row.filter(free).update(lease_until=now + length, lease_token=token) == 1 else None


def release(row: QuerySet, token: str, **also) -> bool:
    """Clears the lease (and writes ``also``) only while ``token`` still holds it."""
    return row.filter(lease_token=token).update(lease_until=None, lease_token="", **also) == 1  # nosec B106: no lease, not a secret


@contextmanager
def round_lease(kind: str, length: timedelta) -> Iterator[str | None]:
    """Hold the lease of one kind of round for the ``with`` block: yields the token, or None when another
    round of that kind holds it (the caller skips its round: the next one comes soon enough)."""
    RoundLease.objects.bulk_create([RoundLease(kind=kind)], ignore_conflicts=True)
    row = RoundLease.objects.filter(kind=kind)
    token = acquire(row, length)
    try:
        yield token
    finally:
        if token is not None:
            release(row, token)
