"""Time arithmetic done by the database, as float seconds: Django's datetime values cost a Python parse per
row (its PostgreSQL loader and its SQLite converter are both Python), which dominates reads of thousands of
rows that only need a number."""

from __future__ import annotations

from django.db.models import F, FloatField, Func


class _Seconds(Func):
    """A float number of seconds, as both databases return it (double precision / REAL)."""

    output_field = FloatField()

    @property
    def convert_value(self):
        # The database already returns a float: skip Django's float() per row.
        return self._convert_value_noop

    @staticmethod
    def postgresql_seconds(expression: str) -> str:
        # EXTRACT returns numeric since PostgreSQL 14: cast, or every row arrives as a Python Decimal.
        return f"CAST(EXTRACT(EPOCH FROM {expression}) AS double precision)"


class SecondsBetween(_Seconds):
    """``end - start`` in seconds, computed by the database itself. Django's own datetime subtraction on
    SQLite calls back into Python for every row (a month of jobs: most of the utilisation page's time)."""

    arg_joiner = " - "
    template = _Seconds.postgresql_seconds("(%(expressions)s)")

    def __init__(self, start: str, end: str) -> None:
        super().__init__(F(end), F(start))

    def as_sqlite(self, compiler, connection, **extra_context):
        return self.as_sql(
            compiler, connection, template="((julianday(%(expressions)s)) * 86400.0)", arg_joiner=") - julianday("
        )


class EpochSeconds(_Seconds):
    """A datetime column as seconds since the Unix epoch (NULL stays NULL), as ``datetime.timestamp()`` gives
    it on PostgreSQL; SQLite's date functions keep milliseconds, so there it is rounded to the millisecond."""

    template = _Seconds.postgresql_seconds("%(expressions)s")

    def __init__(self, column: str) -> None:
        super().__init__(F(column))

    def as_sqlite(self, compiler, connection, **extra_context):
        return self.as_sql(compiler, connection, template="((julianday(%(expressions)s) - 2440587.5) * 86400.0)")
