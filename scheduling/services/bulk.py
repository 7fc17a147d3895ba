"""Writing many changed rows at once, fast.

Django's ``bulk_update`` builds one ``CASE WHEN id=... THEN ...`` expression per field and row; for a
scrape of 37,500 workloads that costs about a minute of Python time per round. An upsert keyed by the
primary key (``INSERT ... ON CONFLICT (id) DO UPDATE SET ...``, PostgreSQL and SQLite alike) writes
the same rows in a fraction of that: the values are plain parameters.
"""

import functools
from collections.abc import Iterable, Sequence

from django.db import connection, models


def field_values(row: models.Model, fields: Sequence[str]) -> tuple:
    """The values of ``fields`` as they stand (foreign keys by id, so nothing is fetched), to compare later."""
    meta = row._meta
    return tuple(getattr(row, meta.get_field(name).attname) for name in fields)


def write_rows(model: type[models.Model], rows: Sequence[models.Model], fields: Sequence[str], batch_size: int = 1000):
    """Save ``fields`` of existing ``rows`` (each with its primary key) in batched upserts."""
    if not rows:
        return
    model._default_manager.bulk_create(
        rows,
        batch_size=batch_size,
        update_conflicts=True,
        unique_fields=[model._meta.pk.name],
        update_fields=list(fields),
    )


def chunks(values: Sequence, size: int = 10_000) -> Iterable[Sequence]:
    """``values`` in slices short enough for an ``IN (...)`` list on any backend (SQLite's limit is 32,766)."""
    for start in range(0, len(values), size):
        yield values[start : start + size]


def insert_row(model: type[models.Model], **values) -> None:
    """One new row, its INSERT built once per model and set of fields: ``create`` compiles the statement and
    builds a model instance for every row, most of a hot path's CPU when it writes one row per request (the
    admission webhook). ``values`` by field name (foreign keys by their ``_id`` attname); no signals are sent."""
    names = tuple(values)
    fields = _fields(model, names)
    params = [field.get_db_prep_save(values[name], connection) for name, field in zip(names, fields, strict=True)]
    with connection.cursor() as cursor:
        cursor.execute(_insert_sql(model, names, connection.vendor), params)


@functools.cache
def _fields(model: type[models.Model], names: tuple[str, ...]) -> tuple[models.Field, ...]:
    by_attname = {field.attname: field for field in model._meta.concrete_fields}
    return tuple(by_attname[name] for name in names)


@functools.cache
def _insert_sql(model: type[models.Model], names: tuple[str, ...], vendor: str) -> str:
    quote = connection.ops.quote_name
    columns = ", ".join(quote(field.column) for field in _fields(model, names))
    marks = ", ".join(["%s"] * len(names))
    return f"INSERT INTO {quote(model._meta.db_table)} ({columns}) VALUES ({marks})"  # nosec B608: names from _meta
