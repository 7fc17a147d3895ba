"""Errors and read reports shared by every trace reader.

A trace is evidence: a reader that silently drops rows would bias every figure computed from it. So a
malformed row either stops the read with an error that names file, line and column, or (when the caller
asks for ``on_error="skip"``) is counted in the :class:`ReadReport` with its reason.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

OnError = Literal["raise", "skip"]

# Enough examples to diagnose a bad file without keeping one message per row of a huge one.
MAX_KEPT_MESSAGES = 20


class TraceFormatError(ValueError):
    """A row (or the header) of a trace file cannot be read.

    ``field`` is the 1-based position of the cell in a CSV row, when there is one: the message then reads
    ``file:line:field: column 'name': ...`` like a compiler's, so an editor jumps to the line.
    """

    def __init__(self, path: str | Path, line: int, column: str, message: str, field: int | None = None) -> None:
        self.path = str(path)
        self.line = line
        self.column = column
        self.field = field
        self.message = message
        where = f"{line}:{field}" if field else f"{line}"
        super().__init__(f"{self.path}:{where}: column '{column}': {message}")


@dataclass(frozen=True)
class ReadReport:
    """What a reader did with one file: rows seen, rows kept, and why the others were skipped."""

    path: str
    rows_read: int
    rows_kept: int
    skipped: dict[str, int] = field(default_factory=dict)
    messages: tuple[str, ...] = ()
    ignored_columns: tuple[str, ...] = ()
    malformed_by_column: dict[str, int] = field(default_factory=dict)

    @property
    def rows_skipped(self) -> int:
        return sum(self.skipped.values())

    def as_dict(self) -> dict[str, object]:
        return {
            "path": self.path,
            "rows_read": self.rows_read,
            "rows_kept": self.rows_kept,
            "rows_skipped": self.rows_skipped,
            "skipped": dict(self.skipped),
            "messages": list(self.messages),
            "ignored_columns": list(self.ignored_columns),
            "malformed_by_column": dict(self.malformed_by_column),
        }


class ReportBuilder:
    """Counts rows while a reader runs; every row ends up either kept or skipped with a reason."""

    def __init__(self, path: str | Path, on_error: OnError = "raise") -> None:
        if on_error not in ("raise", "skip"):
            raise ValueError(f"on_error must be 'raise' or 'skip', not {on_error!r}")
        self.path = str(path)
        self.on_error = on_error
        self.rows_read = 0
        self.rows_kept = 0
        self.skipped: Counter[str] = Counter()
        self.messages: list[str] = []
        self.ignored_columns: tuple[str, ...] = ()
        self.malformed_by_column: Counter[str] = Counter()

    def row(self) -> None:
        self.rows_read += 1

    def kept(self) -> None:
        self.rows_kept += 1

    def skip(self, reason: str, message: str = "") -> None:
        self.skipped[reason] += 1
        if message and len(self.messages) < MAX_KEPT_MESSAGES:
            self.messages.append(message)

    def malformed(self, error: TraceFormatError) -> None:
        """Raise in strict mode; otherwise count the row as skipped with the error text."""
        if self.on_error == "raise":
            raise error
        self.skip("malformed", str(error))
        self.malformed_by_column[error.column] += 1

    def build(self) -> ReadReport:
        return ReadReport(
            path=self.path,
            rows_read=self.rows_read,
            rows_kept=self.rows_kept,
            skipped=dict(sorted(self.skipped.items())),
            messages=tuple(self.messages),
            ignored_columns=self.ignored_columns,
            malformed_by_column=dict(sorted(self.malformed_by_column.items())),
        )
