"""Per-table generations on PostgreSQL: a statement-level trigger on every table notes each write.

Writers only ever INSERT a row into ``scheduling_tablechange`` (no row is updated, so concurrent writers
never wait on each other or deadlock); a table's generation is the sum of its rows' weights as a reader's
snapshot sees them, so it moves exactly when a commit that wrote the table becomes visible. The triggers
are (re)installed after every ``migrate`` (``post_migrate``), so tables added later are covered; the
beat task ``compact_table_changes`` folds each table's rows into one, in one statement, so sums never move.
Needs PostgreSQL 14 or later (``CREATE OR REPLACE TRIGGER``); elsewhere nothing is installed and the API
stores no list answers.
"""

import functools
import logging
from collections.abc import Callable, Iterable
from typing import TypeVar

from django.core.cache import cache
from django.db import connections

from scheduling.models import TableChange
from scheduling.models.table_reads import known_tables, note_reads, table_names, tables_read

__all__ = ["cached_while_unchanged", "generations", "known_tables", "note_reads", "table_names", "tables_read"]

T = TypeVar("T")
logger = logging.getLogger(__name__)

TRIGGER = "gpuportal_note_change"
LOG_TABLE = TableChange._meta.db_table  # the only name interpolated into SQL here (values are parameters)
_FUNCTION = (
    f"CREATE OR REPLACE FUNCTION {TRIGGER}() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
    f" INSERT INTO {LOG_TABLE} (table_name, weight) VALUES (TG_TABLE_NAME, 1); RETURN NULL; END $$"  # nosec B608
)


def supported(using: str = "default") -> bool:
    connection = connections[using]
    return connection.vendor == "postgresql" and connection.pg_version >= 140000


@functools.cache
def readiness() -> str:
    """Once per process: "ok", or why generations cannot be trusted to move with every write (then nothing may be
    cached on them: the API's stored list answers, the admission webhook's directory)."""
    if not supported():
        return "off: table generations need PostgreSQL 14 or later"
    uncounted = tables_without_trigger()
    if uncounted:  # a table created outside migrate: its writes would go unseen
        logger.warning("table generations off: no change trigger on %s (run migrate)", ", ".join(uncounted))
        return f"off: no change trigger on {', '.join(uncounted)} (run migrate)"
    return "ok"


def install_triggers(using: str = "default") -> int:
    """Create the trigger on every table but the log itself; returns how many tables carry it."""
    if not supported(using):
        return 0
    every = table_names(using)
    connection = connections[using]
    quote = connection.ops.quote_name
    with connection.cursor() as cursor:
        if LOG_TABLE not in every:  # migrated back below the log: triggers would make every write fail
            cursor.execute(f"DROP FUNCTION IF EXISTS {TRIGGER}() CASCADE")
            return 0
        cursor.execute(_FUNCTION)
        for table in sorted(every - {LOG_TABLE}):
            cursor.execute(
                f"CREATE OR REPLACE TRIGGER {TRIGGER} AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE"
                f" ON {quote(table)} FOR EACH STATEMENT EXECUTE FUNCTION {TRIGGER}()"
            )
    return len(every) - 1


def tables_without_trigger(using: str = "default") -> list[str]:
    tables = table_names(using) - {LOG_TABLE}
    with connections[using].cursor() as cursor:
        cursor.execute(
            "SELECT c.relname FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid WHERE t.tgname = %s", [TRIGGER]
        )
        covered = {row[0] for row in cursor.fetchall()}
    return sorted(tables - covered)


def generations(tables: Iterable[str], using: str = "default") -> dict[str, int]:
    """Each table's generation as this connection's next snapshot sees it (0: not written since install)."""
    names = sorted(set(tables))
    with connections[using].cursor() as cursor:
        cursor.execute(
            f"SELECT table_name, sum(weight) FROM {LOG_TABLE} WHERE table_name = ANY(%s) GROUP BY table_name",  # nosec B608
            [names],
        )
        found = dict(cursor.fetchall())
    return {name: int(found.get(name, 0)) for name in names}


def compact(using: str = "default") -> int:
    """Fold each table's committed rows into one row of the same total weight; returns rows removed."""
    if not supported(using):
        return 0
    with connections[using].cursor() as cursor:
        cursor.execute(
            f"WITH gone AS (DELETE FROM {LOG_TABLE} RETURNING table_name, weight),"  # nosec B608
            f" folded AS (INSERT INTO {LOG_TABLE} (table_name, weight)"
            f" SELECT table_name, sum(weight) FROM gone GROUP BY table_name RETURNING 1)"
            f" SELECT (SELECT count(*) FROM gone) - (SELECT count(*) FROM folded)"
        )
        return int(cursor.fetchone()[0])


def cached_while_unchanged(name: str, tables: Iterable[str], compute: Callable[[], T], timeout_s: int = 600) -> T:
    """``compute()``'s answer, reused while none of ``tables`` (every table it reads) has been written: the key
    holds their generations, read before computing, so a stored answer is never older than its key (a commit
    in between makes it newer, and the next reader's key differs). Computed every time where generations do
    not exist (SQLite) and inside a transaction (its own uncommitted writes would count in the key)."""
    note_reads(tables)
    if connections["default"].in_atomic_block or not supported():
        return compute()
    key = f"unchanged:{name}:" + ",".join(f"{t}={g}" for t, g in sorted(generations(tables).items()))
    found = cache.get(key)
    if found is None:
        found = compute()
        cache.set(key, found, timeout_s)
    return found
