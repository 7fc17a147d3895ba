"""Progress reporting without a clock or a terminal: the simulator calls back, callers draw bars."""

from __future__ import annotations

from collections.abc import Callable

ProgressCallback = Callable[[int, int], None]
"""Called with ``(done, total)`` work units; a caller may map it onto tqdm or a Celery task state."""

# Calling back on every event would cost more than the work it reports on.
PROGRESS_STEPS = 200


class Throttle:
    """Forwards at most about ``PROGRESS_STEPS`` updates (and always the last one)."""

    def __init__(self, callback: ProgressCallback | None, total: int) -> None:
        self.callback = callback
        self.total = max(total, 1)
        self.every = max(1, self.total // PROGRESS_STEPS)
        self.last = -1

    def __call__(self, done: int) -> None:
        if self.callback is None:
            return
        if done - self.last >= self.every or done >= self.total:
            self.last = done
            self.callback(min(done, self.total), self.total)
