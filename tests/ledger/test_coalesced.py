"""Many scrapes ending together evaluate the ledger once, and none of them is missed (issue 35 item 3).

A scrape that finds another evaluation under way does not wait for the lock (that serialised parallel scrapes and
was most of a round's CPU); the evaluation under way reads the sources' last attempts again once committed and
evaluates again when one changed meanwhile. Real PostgreSQL row locks, two database connections."""

import threading

import pytest
from django.db import connection
from django.utils import timezone

from scheduling.engine import ledger as ledger_engine
from scheduling.models import LedgerFinding, LedgerRound
from scheduling.services import ledger
from tests.support import require_postgres

pytestmark = pytest.mark.django_db(transaction=True)


def _in_thread(target) -> threading.Thread:
    def run():
        try:
            target()
        finally:
            connection.close()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def test_a_scrape_ending_during_an_evaluation_is_evaluated_by_it_and_does_not_wait(two_sources, monkeypatch):
    require_postgres()  # SQLite has no row locks: every scrape evaluates in turn there, as before
    now = timezone.now()
    two_sources.scrape_slurm(now)
    two_sources.scrape_k8s(now)
    assert ledger.evaluate_after_scrape() is not None  # nobody else evaluating: it evaluates
    reading, go, calls = threading.Event(), threading.Event(), []
    detect = ledger_engine.detect

    def slow_detect(*args, **kwargs):
        calls.append(1)
        if len(calls) == 1:  # the first evaluation has read the views; a scrape commits meanwhile
            reading.set()
            assert go.wait(60)
        return detect(*args, **kwargs)

    monkeypatch.setattr(ledger_engine, "detect", slow_detect)
    outcomes = []
    holder = _in_thread(lambda: outcomes.append(ledger.evaluate_after_scrape()))
    assert reading.wait(60)
    two_sources.k8s_owns.add("dgx02")  # now both sources may schedule on dgx02
    two_sources.scrape_k8s(timezone.now())
    evaluated_before = LedgerRound.objects.get(pk=1).evaluated_at
    assert ledger.evaluate_after_scrape() is None  # the lock is held: it returns at once, not after the holder
    go.set()
    holder.join(60)
    assert not holder.is_alive() and outcomes and outcomes[0] is not None
    assert len(calls) == 2  # the holder saw the scrape's attempt change and evaluated again
    double = LedgerFinding.objects.get(kind=LedgerFinding.Kind.DOUBLE_OWNERSHIP, closed_at__isnull=True)
    assert double.node == "dgx02"
    assert LedgerRound.objects.get(pk=1).evaluated_at > evaluated_before


def test_without_a_concurrent_scrape_one_evaluation_is_enough(two_sources, monkeypatch):
    now = timezone.now()
    two_sources.scrape_slurm(now)
    two_sources.scrape_k8s(now)
    calls = []
    detect = ledger_engine.detect
    monkeypatch.setattr(ledger_engine, "detect", lambda *a, **k: calls.append(1) or detect(*a, **k))
    assert ledger.evaluate_after_scrape() is not None
    assert len(calls) == 1
