"""Why a collection round failed.

A collector either returns a whole :class:`~scheduling.collectors.snapshot.Snapshot` or raises one of
these: callers mark the source stale and keep the last good data instead of storing half a picture.
"""

from __future__ import annotations


class CollectorError(Exception):
    """Base class: the round produced nothing usable."""


class SourceUnavailable(CollectorError):
    """The orchestrator could not be reached or answered with an error (timeout, 5xx, auth, 405).

    ``retryable`` tells the retry layer whether trying again soon can help (a 500 or a timeout can,
    a 401 or a 405 will not).
    """

    def __init__(self, message: str, *, retryable: bool = True, status: int | None = None) -> None:
        super().__init__(message)
        self.retryable = retryable
        self.status = status


class CircuitOpen(SourceUnavailable):
    """The breaker is open: we did not even try, to spare a struggling orchestrator."""

    def __init__(self, message: str) -> None:
        super().__init__(message, retryable=False)


class MalformedResponse(CollectorError):
    """The orchestrator answered, but not with a whole, well-formed document (truncated JSON, a missing
    key, a truncated list, a reported partial failure). Never retried within a round: the next round will
    ask again."""
