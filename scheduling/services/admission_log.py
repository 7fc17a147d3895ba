"""The admission webhook's decision rows, written in batches off the request path.

One INSERT per admission, in autocommit, was the webhook's largest single cost after the directory (a round trip,
a commit and its WAL flush, and a row in the table-change log from the statement trigger, for every pod created:
hundreds a second). So on PostgreSQL each process buffers its decisions and one background thread writes them
every ``GPUPORTAL_ADMISSION_DECISION_FLUSH_SECONDS`` (0.25 s) in one multi-row INSERT and one commit.

Kept, and bounded: a decision is in the table within about one flush interval; the buffer holds at most
``GPUPORTAL_ADMISSION_DECISION_BUFFER`` rows (while the database is away): beyond that the oldest are dropped,
counted and logged, and the webhook keeps answering. A worker flushes what it holds when it exits (gunicorn's
``worker_exit``, and ``atexit``); only a killed process loses its last interval. Written in the request, as
before, when the interval is 0, on SQLite (the embedded, single-process mode) and inside a transaction (tests).
Retention is ``prune_decisions``'s, unchanged.
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
import time
from collections import deque

from django.conf import settings
from django.db import DatabaseError, DataError, IntegrityError, connection, connections, transaction

from scheduling.models import AdmissionDecision, Team

from .bulk import insert_row

log = logging.getLogger(__name__)


class DecisionLog:
    """This process's unwritten decisions (each the field values ``insert_row`` takes) and their writer thread."""

    def __init__(self) -> None:
        self._rows: deque[dict] = deque()
        self._lock = threading.Lock()
        self._writer_pid = 0  # the process whose writer thread runs (a forked worker starts its own)
        self.dropped = 0
        self.idle = threading.Event()  # set while the writer thread holds no database connection

    def record(self, values: dict) -> None:
        if not self.batched():
            insert_row(AdmissionDecision, **values)
            return
        bound = settings.GPUPORTAL_ADMISSION_DECISION_BUFFER
        with self._lock:
            while len(self._rows) >= bound:
                self._rows.popleft()
                self.dropped += 1
            self._rows.append(values)
            if self._writer_pid != os.getpid():
                self._start_writer()

    @staticmethod
    def batched() -> bool:
        return (settings.GPUPORTAL_ADMISSION_DECISION_FLUSH_SECONDS > 0 and connection.vendor == "postgresql"
                and not connection.in_atomic_block)

    def pending(self) -> int:
        return len(self._rows)

    def flush(self) -> int:
        """Write every buffered decision in one transaction; how many. On a database error they go back to the
        front of the buffer (still bounded) and the error is raised."""
        with self._lock:
            batch = list(self._rows)
            self._rows.clear()
        if not batch:
            return 0
        try:
            _write(batch)
        except (IntegrityError, DataError):
            self.dropped += _write_one_by_one(batch)  # one bad row must not hold back every later decision
        except DatabaseError:
            with self._lock:
                self._rows.extendleft(reversed(batch))
                while len(self._rows) > settings.GPUPORTAL_ADMISSION_DECISION_BUFFER:
                    self._rows.popleft()
                    self.dropped += 1
            raise
        return len(batch)

    def _start_writer(self) -> None:
        self._writer_pid = os.getpid()
        threading.Thread(target=self._write_forever, name="admission-decisions", daemon=True).start()

    def _write_forever(self) -> None:
        reported = 0
        while True:  # a daemon thread: it ends with its process (atexit flushes the rest)
            time.sleep(settings.GPUPORTAL_ADMISSION_DECISION_FLUSH_SECONDS or 0.25)
            if not self.pending():
                connections.close_all()  # idle: this thread's connection is not kept open for nothing
                self.idle.set()
                continue
            self.idle.clear()
            try:
                self.flush()
            except DatabaseError as error:
                log.warning("admission decisions not written yet (%d held, retried): %s", self.pending(), error)
                connections.close_all()  # this thread's connection: the next try reconnects
            if self.dropped != reported:
                log.error("admission decisions dropped: %d so far (buffer full, or refused by the database)",
                          self.dropped)
                reported = self.dropped

    def quiesce(self, timeout: float = 5.0) -> bool:
        """Write what is held now and wait until the writer thread has let go of its connection (tests, before the
        database is emptied or dropped); whether it did within ``timeout``."""
        self.flush()
        return self._writer_pid != os.getpid() or self.idle.wait(timeout)


def _write(batch: list[dict]) -> None:
    """One multi-row INSERT. A team deleted since its decision was made is no longer named (as its rows' are)."""
    named = {values["team_id"] for values in batch if values.get("team_id") is not None}
    gone = named - set(Team.objects.filter(pk__in=named).values_list("pk", flat=True)) if named else set()
    rows = [AdmissionDecision(**{**values, "team_id": None} if values.get("team_id") in gone else values)
            for values in batch]
    AdmissionDecision.objects.bulk_create(rows, batch_size=500)


def _write_one_by_one(batch: list[dict]) -> int:
    """Each row in its own INSERT, those the database refuses logged and skipped; how many were skipped."""
    refused = 0
    for values in batch:
        try:
            with transaction.atomic():
                _write([values])
        except (IntegrityError, DataError) as error:
            refused += 1
            log.error("admission decision %s not kept: %s", values.get("uid"), error)
    return refused


decisions = DecisionLog()


def flush_at_exit() -> None:
    """What a worker still holds, written before it exits (gunicorn's ``worker_exit`` hook and ``atexit``)."""
    try:
        decisions.flush()
    except DatabaseError as error:
        log.error("admission decisions lost at exit (%d): %s", decisions.pending(), error)


atexit.register(flush_at_exit)
