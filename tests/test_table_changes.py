"""Per-table generations: every write statement counts, on any table; without the log, no triggers."""

import pytest
from django.db import connection, transaction

from scheduling.models import Team
from scheduling.services import table_changes
from tests.support import require_postgres


@pytest.fixture(autouse=True)
def _postgres(db):
    require_postgres()


def _trigger_count() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_trigger WHERE tgname = %s", [table_changes.TRIGGER])
        return cursor.fetchone()[0]


def test_each_writing_statement_moves_only_its_tables_generation():
    before = table_changes.generations(["scheduling_team", "scheduling_node"])
    Team.objects.create(slug="a", name="A")
    Team.objects.filter(slug="a").update(name="B")
    Team.objects.bulk_create([Team(slug="b", name="B"), Team(slug="c", name="C")])
    after = table_changes.generations(["scheduling_team", "scheduling_node"])
    assert after["scheduling_team"] == before["scheduling_team"] + 3
    assert after["scheduling_node"] == before["scheduling_node"]


def test_without_the_log_table_the_triggers_are_removed_and_writes_still_work():
    assert _trigger_count() > 0
    with transaction.atomic():  # PostgreSQL DDL is transactional: all of this is rolled back
        with connection.cursor() as cursor:
            cursor.execute(f"ALTER TABLE {table_changes.LOG_TABLE} RENAME TO tablechange_away")
        assert table_changes.install_triggers() == 0
        assert _trigger_count() == 0
        Team.objects.create(slug="still-writable", name="W")  # with a trigger left, this would fail
        transaction.set_rollback(True)
    assert _trigger_count() > 0
