"""A derived figure reused while the tables it reads are unchanged (services/table_changes.py): reused with no
write, recomputed after a committed write to any of them, and the tables declared are all it reads."""

import pytest
from django.db import transaction

from scheduling.models import Node
from scheduling.selectors import fleet as fleet_reads
from scheduling.services.table_changes import cached_while_unchanged, tables_read
from tests.support import require_postgres


def test_the_largest_gangs_read_only_the_tables_declared(fleet):
    found: set[str] = set()
    with tables_read(found):
        fleet_reads.largest_gangs_now()
    assert found and found <= set(fleet_reads.LARGEST_GANGS_TABLES)


@pytest.mark.usefixtures("transactional_db")
def test_an_answer_is_reused_until_a_table_it_reads_is_written(orchestrator):
    require_postgres()
    Node.objects.create(orchestrator=orchestrator, name="n0", gpu_model="H100", gpu_total=8)
    computed: list[dict] = []

    def compute():
        computed.append(fleet_reads.largest_gangs_now())
        return computed[-1]

    first = cached_while_unchanged("test-gangs", fleet_reads.LARGEST_GANGS_TABLES, compute)
    assert cached_while_unchanged("test-gangs", fleet_reads.LARGEST_GANGS_TABLES, compute) == first
    assert len(computed) == 1
    Node.objects.filter(name="n0").update(gpu_allocated=8)
    after = cached_while_unchanged("test-gangs", fleet_reads.LARGEST_GANGS_TABLES, compute)
    assert len(computed) == 2 and after != first and after[8] == 0
    with transaction.atomic():  # inside a transaction its own writes would count: always computed
        cached_while_unchanged("test-gangs", fleet_reads.LARGEST_GANGS_TABLES, compute)
    assert len(computed) == 3


@pytest.mark.usefixtures("transactional_db")
def test_a_capture_around_a_reused_answer_depends_on_its_tables(orchestrator):
    require_postgres()
    cached_while_unchanged("test-gangs", fleet_reads.LARGEST_GANGS_TABLES, fleet_reads.largest_gangs_now)
    outer: set[str] = set()
    with tables_read(outer):
        inner: set[str] = set()
        with tables_read(inner):  # reused: none of its SQL runs, its tables count all the same
            cached_while_unchanged("test-gangs", fleet_reads.LARGEST_GANGS_TABLES, fleet_reads.largest_gangs_now)
    assert set(fleet_reads.LARGEST_GANGS_TABLES) <= inner <= outer
