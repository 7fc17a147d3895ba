"""Time arithmetic done by the database, as float seconds: Django's datetime values cost a Python parse per
row (its PostgreSQL loader and its SQLite converter are both Python), which dominates reads of thousands of
rows that only need a number."""

from __future__ import annotations

from django.db.models import F, FloatField, Func


class SecondsBetween(Func):
    """``end - start`` in seconds, computed by the database itself. Django's own datetime subtraction on
    SQLite calls back into Python for every row (a month of jobs: most of the utilisation page's time)."""

    arg_joiner = " - "
    # EXTRACT returns numeric since PostgreSQL 14: cast, or every row arrives as a Python Decimal.
    template = "CAST(EXTRACT(EPOCH FROM (%(expressions)s)) AS double precision)"
    output_field = FloatField()

    def __init__(self, start: str, end: str) -> None:
        super().__init__(F(end), F(start))

    @property
    def convert_value(self):
        # Both databases already return a float (double precision / REAL): skip Django's float() per row.
        return self._convert_value_noop

    def as_sqlite(self, compiler, connection, **extra_context):
        return self.as_sql(
            compiler, connection, template="((julianday(%(expressions)s)) * 86400.0)", arg_joiner=") - julianday("
        )


class EpochSeconds(Func):
    """A datetime column as seconds since the Unix epoch (NULL stays NULL), as ``datetime.timestamp()`` gives
    it on PostgreSQL; SQLite's date functions keep milliseconds, so there it is rounded to the millisecond."""

    # EXTRACT returns numeric since PostgreSQL 14: cast, or every row arrives as a Python Decimal.
    template = "CAST(EXTRACT(EPOCH FROM %(expressions)s) AS double precision)"
    output_field = FloatField()

    def __init__(self, column: str) -> None:
        super().__init__(F(column))

    @property
    def convert_value(self):
        return self._convert_value_noop

    def as_sqlite(self, compiler, connection, **extra_context):
        return self.as_sql(compiler, connection, template="((julianday(%(expressions)s) - 2440587.5) * 86400.0)")
