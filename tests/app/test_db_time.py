"""EpochSeconds: a datetime column as float seconds, computed by the database (selectors/db_time.py)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from django.db import connection

from scheduling.models import Workload
from scheduling.selectors.db_time import EpochSeconds

SUBMITTED = datetime(2026, 3, 2, 9, 15, 7, 123456, tzinfo=UTC)


@pytest.mark.django_db
def test_a_column_reads_as_its_timestamp_and_null_stays_none(orchestrator) -> None:
    pending = Workload.objects.create(orchestrator=orchestrator, external_id="p", submitted_at=SUBMITTED,
                                      state=Workload.State.PENDING)
    seconds, started = Workload.objects.filter(pk=pending.pk).annotate(
        s=EpochSeconds("submitted_at"), t=EpochSeconds("started_at")).values_list("s", "t").get()
    assert started is None
    assert isinstance(seconds, float)
    if connection.vendor == "postgresql":
        assert seconds == SUBMITTED.timestamp()  # to the microsecond
    else:
        assert abs(seconds - SUBMITTED.timestamp()) <= 0.001  # SQLite's date functions keep milliseconds
