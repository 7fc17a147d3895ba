"""/health's broker and cache checks, each bounded so a hung Redis is reported, not waited for.

A stopped (SIGSTOP) or blackholed Redis accepts the TCP connection in the kernel and then never answers,
so a check without a read timeout blocks for as long as the client's defaults allow (12 s and more
through kombu's connection retries). Here each check talks to Redis with ``SOCKET_TIMEOUT_S`` connect
and read timeouts, the checks run at once in threads, and whatever has not answered by ``CHECK_TIMEOUT_S``
is reported as ``timeout``: /health answers within about a second whatever the broker does.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout

import redis
from amqp.exceptions import ChannelError
from django.conf import settings
from django.core.cache import caches
from django.core.cache.backends.redis import RedisCache
from django.db import connection

from gpuportal.celery import app

SOCKET_TIMEOUT_S = 0.5
CHECK_TIMEOUT_S = 1.0


def broker_status() -> str:
    """ "ok", or "down: why" (a refused or failed connection); a hang is cut by ``SOCKET_TIMEOUT_S``."""
    url = settings.CELERY_BROKER_URL
    try:
        if url.startswith(("redis://", "rediss://")):
            _ping(redis.Redis.from_url(url, socket_connect_timeout=SOCKET_TIMEOUT_S, socket_timeout=SOCKET_TIMEOUT_S))
        else:  # the embedded filesystem broker, or another kombu transport: kombu's own bounded check
            with app.connection_for_write(url=url) as conn:
                conn.ensure_connection(max_retries=1, timeout=SOCKET_TIMEOUT_S)
    except Exception as error:
        return _down(error)
    return "ok"


def database_status() -> str:
    """ "ok", or "down: why". Run in a health thread (``start``): it opens that thread's own connection, so a
    hung database (SIGSTOP: the kernel accepts, nobody answers) costs /health ``CHECK_TIMEOUT_S``, not the
    request thread's kept connection blocking until gunicorn kills the worker (issue 36: 40.7 s)."""
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
    except Exception as error:
        return _down(error)
    finally:
        connection.close()
    return "ok"


def queue_depth(queue: str = "celery") -> int:
    """Messages waiting in the broker's ``queue`` (kombu's passive declare: LLEN on Redis, files on the
    filesystem broker); raises when the broker does not answer, so callers bound it with ``start``."""
    with app.connection_for_read(url=settings.CELERY_BROKER_URL) as conn:
        conn.ensure_connection(max_retries=1, timeout=SOCKET_TIMEOUT_S)
        try:
            return conn.default_channel.queue_declare(queue=queue, passive=True).message_count
        except ChannelError as error:
            if "NOT_FOUND" in str(error):  # no worker or producer declared it yet: nothing waits
                return 0
            raise


def cache_status() -> str:
    """ "ok" for a reachable Redis cache or a process-memory one; "down: why" otherwise (the portal keeps
    serving without it, so this does not fail /health)."""
    cache = caches["default"]
    if not isinstance(cache, RedisCache):
        return "ok"
    try:
        _ping(cache._cache.get_client(write=True))  # its pool has the timeouts of settings.CACHES
    except Exception as error:
        return _down(error)
    return "ok"


def _ping(client) -> None:
    try:
        client.ping()
    finally:
        client.close()


def _down(error: Exception) -> str:
    if isinstance(error, redis.TimeoutError | TimeoutError):
        return f"timeout: no answer within {SOCKET_TIMEOUT_S:g} s ({error})"
    return f"down: {type(error).__name__}: {error}"


def start(checks: dict[str, Callable[[], str]], timeout: float = CHECK_TIMEOUT_S) -> Callable[[], dict[str, str]]:
    """Start the checks at once; the returned function collects them, reporting one that has not answered
    within ``timeout`` of the start as a timeout (its thread ends on its own socket timeout; nobody waits)."""
    pool = ThreadPoolExecutor(max_workers=len(checks), thread_name_prefix="health")
    futures = {name: pool.submit(check) for name, check in checks.items()}
    deadline = time.monotonic() + timeout

    def collect() -> dict[str, str]:
        results = {}
        for name, future in futures.items():
            try:
                results[name] = future.result(timeout=max(deadline - time.monotonic(), 0.0))
            except FutureTimeout:
                results[name] = f"timeout: no answer within {timeout:g} s"
        pool.shutdown(wait=False, cancel_futures=True)
        return results

    return collect
