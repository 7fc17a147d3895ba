"""Which tables a block of code read: the SQL it ran, and the stored answers it used without running theirs.

Low in the layers (beside the models) so that a selector serving an answer from the cache can say what the
answer was computed from (``note_reads``); pages and API lists stored on PostgreSQL's table generations
(``services/table_changes.py``) depend on every table noted here."""

import functools
import re
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from django.db import connections

WORD = re.compile(r"[A-Za-z0-9_]+")  # table names, quoted by the ORM or not in raw SQL
# The table sets of the captures (``tables_read``) open in this context, innermost last.
_captures: ContextVar[tuple[set[str], ...]] = ContextVar("table_captures", default=())


def table_names(using: str = "default") -> frozenset[str]:
    """Every table of the database."""
    connection = connections[using]
    with connection.cursor() as cursor:
        return frozenset(connection.introspection.table_names(cursor))


known_tables = functools.cache(table_names)  # once per process: matched against SQL while capturing


@contextmanager
def tables_read(found: set[str]) -> Iterator[None]:
    """Collect into ``found`` the tables that the SQL run inside the block names, and those of stored answers
    used inside it without running their SQL (``note_reads``). Captures nest: each sees everything inside it."""
    known = known_tables()

    def watch(execute, sql, params, many, context):
        found.update(known.intersection(WORD.findall(sql)))
        return execute(sql, params, many, context)

    token = _captures.set((*_captures.get(), found))
    try:
        with connections["default"].execute_wrapper(watch):
            yield
    finally:
        _captures.reset(token)


def note_reads(tables: Iterable[str]) -> None:
    """An answer computed earlier from ``tables`` is used: every open capture depends on them too, so a page
    stored around it goes stale when they change, as if it had run the SQL itself."""
    names = tuple(tables)
    for found in _captures.get():
        found.update(names)
