"""A small CSV row reader whose every failure names file, line and column.

The trace formats are all plain CSV; what differs is which columns they have and how values are typed.
``Row`` wraps one record with typed getters that raise :class:`TraceFormatError` pointing at the exact
cell, so each reader is a short list of "this column is an int >= 1" statements.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import datetime
from pathlib import Path
from typing import TypeVar

from scheduling.traces.errors import ReportBuilder, TraceFormatError

N = TypeVar("N", int, float)
T = TypeVar("T")


class Row:
    """One data record: ``line`` is the 1-based physical line number in the file.

    A record with too few or too many fields carries that ``problem``: reading any of its cells raises it,
    so the reader's own per-row error handling (stop, or skip and count) applies to it like to a bad cell.
    """

    __slots__ = ("line", "path", "problem", "values")

    def __init__(self, path: str, line: int, values: dict[str, str], problem: TraceFormatError | None = None) -> None:
        self.path = path
        self.line = line
        self.values = values
        self.problem = problem

    def error(self, column: str, message: str) -> TraceFormatError:
        return TraceFormatError(self.path, self.line, column, message, _position(self.values, column))

    def has(self, column: str) -> bool:
        return column in self.values

    def text(self, column: str, *, allow_empty: bool = True) -> str:
        if self.problem is not None:
            raise self.problem
        value = self.values.get(column, "").strip()
        if not value and not allow_empty:
            raise self.error(column, "empty value")
        return value

    def integer(self, column: str, *, minimum: int | None = None, maximum: int | None = None) -> int:
        raw = self.text(column, allow_empty=False)
        try:
            number = float(raw)
        except ValueError:
            raise self.error(column, f"expected an integer, got {raw!r}") from None
        if not number.is_integer():
            raise self.error(column, f"expected an integer, got {raw!r}")
        return self._bounded(column, int(number), minimum, maximum)

    def number(
        self,
        column: str,
        *,
        minimum: float | None = None,
        maximum: float | None = None,
        default: float | None = None,
    ) -> float:
        raw = self.text(column)
        if not raw and default is not None:
            return default
        try:
            number = float(raw)
        except ValueError:
            raise self.error(column, f"expected a number, got {raw!r}") from None
        if math.isnan(number) or math.isinf(number):
            raise self.error(column, f"expected a finite number, got {raw!r}")
        return self._bounded(column, number, minimum, maximum)

    def timestamp(self, column: str) -> datetime:
        raw = self.text(column, allow_empty=False)
        try:
            return datetime.fromisoformat(raw)
        except ValueError:
            raise self.error(column, f"expected a date and time like 2017-10-09 07:01:55, got {raw!r}") from None

    def _bounded(self, column: str, value: N, minimum: N | None, maximum: N | None) -> N:
        if minimum is not None and value < minimum:
            raise self.error(column, f"{value} is below the minimum {minimum}")
        if maximum is not None and value > maximum:
            raise self.error(column, f"{value} is above the maximum {maximum}")
        return value


class CsvFile:
    """Iterates the rows of ``path``; checks that the header has every required column.

    Files without a header row (Alibaba PAI tables) pass ``fieldnames``. Rows whose field count differs
    from the header carry an error naming the first missing (or the extra) column (``Row.problem``).
    """

    def __init__(self, path: str | Path, required: Sequence[str], fieldnames: Sequence[str] | None = None) -> None:
        self.path = Path(path)
        self.required = tuple(required)
        self.fieldnames = tuple(fieldnames) if fieldnames is not None else None
        self.columns: tuple[str, ...] = ()

    def __iter__(self) -> Iterator[Row]:
        if not self.path.is_file():
            raise FileNotFoundError(f"trace file not found: {self.path}")
        with self.path.open(newline="", encoding="utf-8-sig") as handle:
            reader = csv.reader(handle)
            columns = self._header(reader)
            name = str(self.path)
            for fields in reader:
                if not fields or (len(fields) == 1 and not fields[0].strip()):
                    continue  # blank lines carry no job; csv gives them as [] or ['']
                yield self._row(name, reader.line_num, columns, fields)

    def _header(self, reader: Iterator[list[str]]) -> tuple[str, ...]:
        if self.fieldnames is not None:
            self.columns = self.fieldnames
        else:
            try:
                self.columns = tuple(column.strip() for column in next(reader))
            except StopIteration:
                raise TraceFormatError(self.path, 1, self.required[0] if self.required else "", "empty file") from None
        for column in self.required:
            if column not in self.columns:
                raise TraceFormatError(self.path, 1, column, f"missing column (header has {', '.join(self.columns)})")
        return self.columns

    @staticmethod
    def _row(name: str, line: int, columns: tuple[str, ...], fields: list[str]) -> Row:
        problem = None
        if len(fields) < len(columns):
            problem = TraceFormatError(
                name,
                line,
                columns[len(fields)],
                f"missing value ({len(fields)} of {len(columns)} fields)",
                len(fields) + 1,
            )
        elif len(fields) > len(columns):
            problem = TraceFormatError(
                name,
                line,
                f"#{len(columns) + 1}",
                f"extra field ({len(fields)} of {len(columns)} fields)",
                len(columns) + 1,
            )
        return Row(name, line, dict(zip(columns, fields, strict=False)), problem)


def _position(values: dict[str, str], column: str) -> int | None:
    """1-based field number of ``column`` in the row (None for a column the row does not have)."""
    for index, name in enumerate(values, start=1):
        if name == column:
            return index
    return None


def read_unique(
    rows: Iterable[Row],
    report: ReportBuilder,
    parse: Callable[[Row], T],
    key: Callable[[T], str],
    *,
    column: str,
    what: str,
) -> list[T]:
    """Parse every row, counting it in ``report``; a key seen before is an error on ``column``."""
    items: list[T] = []
    seen: set[str] = set()
    for row in rows:
        report.row()
        try:
            item = parse(row)
            if key(item) in seen:
                raise row.error(column, f"duplicate {what} {key(item)!r}")
        except TraceFormatError as error:
            report.malformed(error)
            continue
        seen.add(key(item))
        items.append(item)
        report.kept()
    return items
