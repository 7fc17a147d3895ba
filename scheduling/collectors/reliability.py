"""Timeouts, retries with exponential backoff and jitter, and a circuit breaker per orchestrator.

The breaker's memory is a plain :class:`BreakerState` owned by the caller, so a Celery task can load it
from the database before a round and save it afterwards (``to_dict``/``from_dict``); nothing here keeps
state between calls on its own. Time comes from an injectable wall clock because the state may be
persisted and read back by another process (a monotonic clock would not survive that).
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from typing import Any, TypeVar

from .errors import CircuitOpen, SourceUnavailable

T = TypeVar("T")

DEFAULT_TIMEOUT_S = 10.0


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """``attempts`` tries in total; before retry *n* (0-based) wait ``min(max, base * 2**n)`` shrunk by
    up to ``jitter`` (a fraction) so that many workers retrying together do not stampede. ``seed`` makes
    the jitter reproducible in tests."""

    attempts: int = 3
    base_delay_s: float = 0.5
    max_delay_s: float = 8.0
    jitter: float = 0.5
    seed: int | None = None

    def delays(self) -> Iterator[float]:
        rng = random.Random(self.seed)
        for n in range(max(self.attempts - 1, 0)):
            ceiling = min(self.max_delay_s, self.base_delay_s * 2**n)
            yield ceiling * (1.0 - self.jitter * rng.random())


NO_RETRY = RetryPolicy(attempts=1)
DEFAULT_RETRY = RetryPolicy()


@dataclass(slots=True)
class BreakerState:
    """What the breaker remembers; small and JSON-friendly so the caller can persist it."""

    consecutive_failures: int = 0
    opened_at: float | None = None
    last_error: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> BreakerState:
        return cls(
            consecutive_failures=int(data.get("consecutive_failures", 0)),
            opened_at=data.get("opened_at"),
            last_error=str(data.get("last_error", "")),
        )


class CircuitBreaker:
    """Closed -> (``failure_threshold`` failed rounds in a row) -> open -> (after ``reset_after_s``)
    half-open: one trial round; success closes it, failure re-opens it for another period."""

    def __init__(
        self,
        state: BreakerState | None = None,
        *,
        failure_threshold: int = 3,
        reset_after_s: float = 60.0,
        clock: Callable[[], float] = time.time,
        mask: Callable[[str], str] = str,
    ) -> None:
        self.state = state if state is not None else BreakerState()
        # The remembered error is persisted and repeated in later CircuitOpen messages: the caller's
        # mask (scheduling.redact with the source's secrets) runs before it is kept and cut to length.
        self.mask = mask
        self.failure_threshold = failure_threshold
        self.reset_after_s = reset_after_s
        self.clock = clock

    @property
    def status(self) -> str:
        if self.state.opened_at is None:
            return "closed"
        if self.clock() - self.state.opened_at >= self.reset_after_s:
            return "half_open"
        return "open"

    def allow(self) -> bool:
        return self.status != "open"

    def record_success(self) -> None:
        self.state.consecutive_failures = 0
        self.state.opened_at = None
        self.state.last_error = ""

    def record_failure(self, error: str = "") -> None:
        self.state.consecutive_failures += 1
        self.state.last_error = self.mask(error)[:500]
        # A failed half-open trial re-opens at once; otherwise open when the threshold is reached.
        if self.state.opened_at is not None or self.state.consecutive_failures >= self.failure_threshold:
            self.state.opened_at = self.clock()


def with_retries(
    fn: Callable[[], T],
    policy: RetryPolicy = DEFAULT_RETRY,
    sleep: Callable[[float], None] = time.sleep,
) -> T:
    """Call ``fn`` until it succeeds, retrying only retryable :class:`SourceUnavailable` errors."""
    delays = policy.delays()
    while True:
        try:
            return fn()
        except SourceUnavailable as exc:
            delay = next(delays, None) if exc.retryable else None
            if delay is None:
                raise
            sleep(delay)


def guarded(breaker: CircuitBreaker | None, name: str, fn: Callable[[], T]) -> T:
    """Run one collection round under ``breaker``: refuse while open, count the outcome."""
    if breaker is None:
        return fn()
    if not breaker.allow():
        raise CircuitOpen(
            f"{name}: circuit open after {breaker.state.consecutive_failures} failed rounds "
            f"({breaker.state.last_error})"
        )
    try:
        result = fn()
    except Exception as exc:
        breaker.record_failure(f"{type(exc).__name__}: {exc}")
        raise
    breaker.record_success()
    return result
