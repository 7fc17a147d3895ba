"""A TOTAL deadline for orchestrator calls over httpx.

httpx's timeouts bound each socket operation, not a call: a server that sends one byte every 5 s keeps a
10 s read timeout from ever firing, and one scrape then holds a worker slot until Celery's time limit
(issue 36: five minutes with no round for any source). Here every connect, read and write of a connection
made through :func:`deadline_transport` is given at most the time left before the innermost deadline
opened with :func:`total_deadline`, and fails with httpx's own ``ReadTimeout`` once it has passed, so the
collectors' error mapping (a timeout marks the source stale) needs nothing new.

Deadlines nest (a scrape's deadline around each call's): the earliest wins. The deadline lives in a context
variable, not on the connection, because httpx keeps connections alive between calls.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

import httpcore
import httpx

DEFAULT_DEADLINE_S = 30.0

_deadline: ContextVar[tuple[float, float] | None] = ContextVar("gpuportal_http_deadline", default=None)


class DeadlinePassed(httpcore.ReadTimeout):
    """The call's total deadline passed (httpx maps it to ``httpx.ReadTimeout``)."""


@contextmanager
def total_deadline(seconds: float, clock=time.monotonic) -> Iterator[None]:
    """Every call made through a deadline transport inside this block ends within ``seconds`` in all."""
    at = clock() + seconds
    outer = _deadline.get()
    chosen = (at, seconds) if outer is None or at < outer[0] else outer
    token = _deadline.set(chosen)
    try:
        yield
    finally:
        _deadline.reset(token)


def _passed(clock=time.monotonic) -> DeadlinePassed | None:
    current = _deadline.get()
    if current is None or current[0] > clock():
        return None
    return DeadlinePassed(f"total deadline of {current[1]:g} s passed")


def _named(error: httpcore.TimeoutException) -> Exception:
    """A timeout that happened because the deadline shortened it says so."""
    return _passed() or error


def time_left(timeout: float | None, clock=time.monotonic) -> float | None:
    """``timeout`` shortened to what is left of the current deadline; raises once nothing is left."""
    current = _deadline.get()
    if current is None:
        return timeout
    at, seconds = current
    left = at - clock()
    if left <= 0:
        raise DeadlinePassed(f"total deadline of {seconds:g} s passed")
    return left if timeout is None else min(timeout, left)


class _DeadlineStream(httpcore.NetworkStream):
    def __init__(self, inner: httpcore.NetworkStream) -> None:
        self._inner = inner

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        try:
            return self._inner.read(max_bytes, time_left(timeout))
        except httpcore.TimeoutException as error:
            raise _named(error) from error

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        try:
            self._inner.write(buffer, time_left(timeout))
        except httpcore.TimeoutException as error:
            raise _named(error) from error

    def close(self) -> None:
        self._inner.close()

    def start_tls(self, ssl_context: Any, server_hostname: str | None = None, timeout: float | None = None):
        return _DeadlineStream(self._inner.start_tls(ssl_context, server_hostname, time_left(timeout)))

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class _DeadlineBackend(httpcore.NetworkBackend):
    def __init__(self, inner: httpcore.NetworkBackend) -> None:
        self._inner = inner

    def connect_tcp(self, host, port, timeout=None, local_address=None, socket_options=None):
        stream = self._inner.connect_tcp(host, port, time_left(timeout), local_address, socket_options)
        return _DeadlineStream(stream)

    def connect_unix_socket(self, path, timeout=None, socket_options=None):
        return _DeadlineStream(self._inner.connect_unix_socket(path, time_left(timeout), socket_options))

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


def deadline_transport(**kwargs: Any) -> httpx.HTTPTransport:
    """An ``httpx.HTTPTransport`` whose socket operations obey :func:`total_deadline`.

    httpx does not take a network backend as an argument, so the pool's is wrapped in place (pinned httpx
    0.28 / httpcore 1.0; tests/collectors/test_deadline.py fails loudly if that attribute moves).
    """
    transport = httpx.HTTPTransport(**kwargs)
    pool = transport._pool
    pool._network_backend = _DeadlineBackend(pool._network_backend)
    return transport
