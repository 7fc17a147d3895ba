"""Kubernetes sources collected from a watch cache (issue 35 item 1), run by ``manage.py watch_kubernetes``.

Why a process of its own, not a thread in the Celery collect worker: a scrape may run in any worker child
(prefork) and nothing of a worker's memory is meant to outlive a task (services/collection.py), so a watch per
child would list a 150,000-pod cluster once per child and keep as many caches; the scrape task's time limits
would also cut a stream that must stay open. One process per site holds one cache per Kubernetes source and
runs that source's rounds itself, through the same ``collection.scrape`` (lease, breaker, deadline, ingest,
accounting, drift), on the round's interval.

While it runs it renews ``Orchestrator.watched_until`` (three rounds ahead) and the Celery round leaves the
source alone; when it stops, or dies, the mark runs out and the next Celery round re-lists the source as before,
so a missing watcher costs speed, never data. Its own rounds re-list too while a cache is not synced.

Its rounds are also the only ones of a watched source, so ingest keeps a memo of each committed round in this
process (``ingest.remember_rounds``) and writes only what changed since (services/ingest.py).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import timedelta

from django.utils import timezone

from scheduling.collectors import CircuitBreaker
from scheduling.collectors.k8s_watch import WatchingCollector
from scheduling.models import Orchestrator

from .collection import ScrapeOutcome, scrape
from .ingest import forget_rounds, remember_rounds
from .orchestrators import build_collector

MARK_ROUNDS = 3  # a mark this many rounds ahead survives a slow round, and runs out soon after a watcher dies


def watched_sources(names: Iterable[str] = ()) -> list[Orchestrator]:
    """The enabled Kubernetes orchestrators (only ``names`` if given; an unknown name is an error)."""
    rows = Orchestrator.objects.real().filter(kind=Orchestrator.Kind.KUBERNETES)
    names = list(names)
    if names:
        rows = rows.filter(name__in=names)
        missing = set(names) - {o.name for o in rows}
        if missing:
            raise ValueError(f"--name: no enabled Kubernetes orchestrator called {', '.join(sorted(missing))}")
    return list(rows)


def start_watch(orchestrator: Orchestrator, **kwargs) -> WatchingCollector:
    """The source's collector (endpoint, credentials, options as a Celery scrape builds it), its lists and
    watches started in threads; ingest remembers its rounds in this process from now on."""
    remember_rounds(orchestrator)
    return WatchingCollector(build_collector(orchestrator, breaker=None), **kwargs).start()


def mark_watched(orchestrator: Orchestrator, interval_s: float) -> None:
    until = timezone.now() + timedelta(seconds=MARK_ROUNDS * interval_s)
    Orchestrator.objects.filter(pk=orchestrator.pk).update(watched_until=until)


def unmark(orchestrators: Iterable[Orchestrator]) -> None:
    """On a clean stop: the next Celery round re-lists these at once instead of waiting for the mark to run out."""
    orchestrators = list(orchestrators)
    for orchestrator in orchestrators:
        forget_rounds(orchestrator)
    Orchestrator.objects.filter(pk__in=[o.pk for o in orchestrators]).update(watched_until=None)


def watched_round(orchestrator: Orchestrator, watching: WatchingCollector, interval_s: float) -> ScrapeOutcome:
    """One round of a watched source: renew its mark, then scrape it from the cache."""
    mark_watched(orchestrator, interval_s)

    def from_cache(_row: Orchestrator, breaker: CircuitBreaker) -> WatchingCollector:
        return watching.using(breaker)

    return scrape(orchestrator.pk, collector_for=from_cache)
