"""Queueing a long task for a row that was just stored, so the row never outlives its message silently.

The message is published after the row's transaction commits (a worker must find the row), with the
publish retry policy of the Celery settings. When the broker still refuses, the row is marked failed
with the reason at once and ``EnqueueFailed`` tells the caller, which answers 503: a row left ``queued``
with no message behind it would wait forever.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from django.db import transaction

log = logging.getLogger(__name__)


class EnqueueFailed(Exception):
    """The task broker did not take the message (after the publish retries); the row is already failed."""


def enqueue_after_commit(send: Callable[[], object], on_failure: Callable[[str], None]) -> None:
    """Run ``send()`` once the current transaction commits (at once outside one); when it raises, call
    ``on_failure(reason)`` and raise ``EnqueueFailed(reason)`` to whoever committed."""

    def publish() -> None:
        try:
            send()
        except Exception as error:  # kombu's OperationalError, redis-py's timeouts, a refused socket...
            reason = f"could not be queued: the task broker did not answer ({type(error).__name__}: {error})"
            log.warning("enqueue failed: %s", reason)
            on_failure(reason)
            raise EnqueueFailed(reason) from error

    transaction.on_commit(publish)
