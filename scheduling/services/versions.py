"""Optimistic concurrency (issue 36): an edit or a decision applies only to the version it was made on.

Each versioned row (models/versioned.py) says its version; pages carry it in a hidden field and the API in
``ETag``/``If-Match``. Services lock the row, then call :func:`require_version`: a stale version is refused
with :class:`StaleVersion`, whose message names every save since (who, when, why, what fields), so the
person sees what they would have overwritten or approved unseen. ``seen=None`` checks nothing: internal
callers (the reaper, a revert that reads the current row) and API clients that send no ``If-Match``.
"""

from django.core.exceptions import ValidationError
from django.db import models
from django.utils import timezone

from scheduling.models.versioned import Versioned

# Fields whose change a person does not make and need not be told of.
_QUIET_FIELDS = {"version", "synced_at", "id", "history_id", "history_date", "history_user", "history_type"}


class StaleVersion(ValidationError):
    """Rows changed since the versions the edit was made on; the API answers 412 Precondition Failed."""

    def __init__(self, messages: list[str]):
        self.stale = messages
        super().__init__({"version": messages})

    @classmethod
    def combined(cls, errors: list["StaleVersion"]) -> "StaleVersion":
        return cls([message for error in errors for message in error.stale])


def stale_message(label: str, seen: int, current: int, changes: list[str]) -> str:
    return (
        f"{label} changed since you loaded it (your version {seen}, now {current}): "
        + ("; ".join(changes) or "saved again")
        + ". Nothing was saved: reload to see the current values, then decide again."
    )


def etag(instance: Versioned) -> str:
    """The strong ETag of a versioned row: its version, quoted (RFC 9110)."""
    return f'"{instance.version}"'


def parse_if_match(header: str | None) -> int | None:
    """The version an ``If-Match`` header names (``"3"``, ``W/"3"`` or ``3``); None when absent or ``*``."""
    if not header or header.strip() == "*":
        return None
    value = header.split(",")[0].strip().removeprefix("W/").strip('"')
    try:
        return int(value)
    except ValueError:
        rule = f'must be the ETag this API gave, such as "3"; got {header[:40]!r}.'
        raise ValidationError({"If-Match": rule}) from None


def require_version(instance: Versioned, seen: int | None, label: str | None = None) -> None:
    """Refuse the edit unless ``instance`` (locked by the caller) is still at version ``seen``."""
    if seen is None or seen == instance.version:
        return
    raise StaleVersion([stale_message(label or str(instance), seen, instance.version, changes_since(instance, seen))])


def changes_since(instance: models.Model, seen: int) -> list[str]:
    """One line per save after version ``seen``: 'version 4 by alice at 02:31 UTC (reason): gpus 2 → 24'."""
    history = getattr(instance, "history", None)
    if history is None:
        return []
    lines = []
    for record in history.filter(version__gt=seen).order_by("version").select_related("history_user"):
        who = getattr(record.history_user, "username", None) or "the portal"
        when = timezone.localtime(record.history_date).strftime("%Y-%m-%d %H:%M:%S %Z")
        why = f" ({record.history_change_reason})" if record.history_change_reason else ""
        lines.append(f"version {record.version} by {who} at {when}{why}{_fields_changed(record)}")
    return lines


def _fields_changed(record) -> str:
    before = record.prev_record
    if before is None:
        return ""
    delta = record.diff_against(before)
    shown = [f"{c.field} {c.old} → {c.new}" for c in delta.changes if c.field not in _QUIET_FIELDS]
    return ": " + ", ".join(shown) if shown else ""
