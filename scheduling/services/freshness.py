"""What /health says of the background work: is a worker alive, do rounds run, are sources fresh.

Issue 36 (and #29 item 10): /health answered 200 and ``orchestrators: ok`` for 25 minutes after the worker
stopped, because it looked only at errors. Freshness counts here, read from rows the worker writes anyway:

- **worker**: beat sends ``heartbeat`` (default queue) and ``collector_heartbeat`` (the collect queue) every
  ``GPUPORTAL_HEARTBEAT_S``; the worker's task_postrun records each in ``TaskStat.last_finished_at``. A worker
  dead, stuck, or with every slot held shows as a heartbeat older than ``worker_stale_after_s``;
- **rounds**: the age of the last ``run_round`` that succeeded;
- **orchestrators**: a source whose last success is older than ``source_stale_after_s`` is stale even when
  nothing recorded an error (its scrapes stopped running).

A name never seen since the database was created says ``not seen yet`` and fails nothing: a fresh install's
first minute, and test databases with no worker.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.conf import settings

from scheduling.models import Orchestrator, TaskStat

HEARTBEAT = "scheduling.tasks.heartbeat"
COLLECTOR_HEARTBEAT = "scheduling.tasks.collector_heartbeat"
ROUND = "scheduling.tasks.run_round"
NOT_SEEN = "not seen yet"


@dataclass(frozen=True)
class Background:
    worker: str
    collector: str
    rounds: str

    @property
    def healthy(self) -> bool:
        """A collector that is late shows as stale sources; the default worker and rounds fail /health."""
        return all(word in ("ok", NOT_SEEN) for word in (self.worker, self.rounds))


def background(now: datetime) -> Background:
    limits = settings.GPUPORTAL_HEALTH
    stats = {s.name: s for s in TaskStat.objects.filter(name__in=(HEARTBEAT, COLLECTOR_HEARTBEAT, ROUND))}
    beat_limit = limits["worker_stale_after_s"]
    return Background(
        worker=_age_word(_finished(stats.get(HEARTBEAT)), now, beat_limit, "heartbeat"),
        collector=_age_word(_finished(stats.get(COLLECTOR_HEARTBEAT)), now, beat_limit, "heartbeat"),
        rounds=_round_word(stats.get(ROUND), now, limits["round_stale_after_s"]),
    )


def _finished(stat: TaskStat | None) -> datetime | None:
    return stat.last_finished_at if stat else None


def _round_word(stat: TaskStat | None, now: datetime, limit_s: float) -> str:
    """The last round's age; a round that failed last (both stamps are set by the same failure) says so."""
    if stat is not None and stat.last_failed_at is not None and stat.last_failed_at >= stat.last_finished_at:
        return f"failing: the last round failed at {stat.last_failed_at:%Y-%m-%d %H:%M:%S} UTC"
    return _age_word(_finished(stat), now, limit_s, "successful round")


def _age_word(at: datetime | None, now: datetime, limit_s: float, what: str) -> str:
    if at is None:
        return NOT_SEEN
    age = (now - at).total_seconds()
    if age <= limit_s:
        return "ok"
    return f"stale: last {what} {age:.0f} s ago (limit {limit_s:g} s)"


def source_is_stale(orchestrator: Orchestrator, now: datetime) -> bool:
    """Stale by error (``is_stale``) or by age: no success for ``source_stale_after_s``."""
    if orchestrator.is_stale:
        return True
    age = (now - orchestrator.last_success_at).total_seconds()
    return age > settings.GPUPORTAL_HEALTH["source_stale_after_s"]
