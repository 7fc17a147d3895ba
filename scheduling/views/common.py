"""Helpers shared by the page views: the time-range selector and its permalink, table pages, bad queries."""

import csv
import html
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from urllib.parse import urlencode

from django.core.exceptions import BadRequest, PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.utils import timezone
from django.utils.dateparse import parse_datetime
from django.utils.html import strip_tags
from django_tables2 import RequestConfig

# A page of a table shows at most this many rows: more is a download (the API, the CSV reports), not a page.
MAX_PER_PAGE = 500
EARLIEST_END = datetime(2000, 1, 1, tzinfo=UTC)  # before any GPU this portal watches; older dates overflow windows
END_RULE = (
    f"must be an ISO 8601 date and time after {EARLIEST_END:%Y-%m-%d}, such as 2026-03-01T12:00 "
    "(seconds and a UTC offset are optional)"
)
WHOLE_NUMBER = re.compile(r"[0-9]{1,6}")


class BadQuery(BadRequest):
    """A query parameter a page cannot use. Answered with a 400 page that names the parameter and the rule
    and links to the same page without it (``scheduling.views.errors``)."""

    def __init__(self, parameter: str, rule: str, value: str) -> None:
        super().__init__(f"{parameter} {rule}; got {value[:80]!r}.")
        self.parameter = parameter


RANGES = {
    "6h": ("Last 6 hours", timedelta(hours=6)),
    "24h": ("Last 24 hours", timedelta(hours=24)),
    "7d": ("Last 7 days", timedelta(days=7)),
    "30d": ("Last 30 days", timedelta(days=30)),
    "90d": ("Last 90 days", timedelta(days=90)),
    "365d": ("Last year", timedelta(days=365)),
}


@dataclass(frozen=True)
class TimeRange:
    """A window ending now (live) or at a fixed ``end`` (a permalink shows the same window forever)."""

    key: str
    since: datetime
    until: datetime
    pinned: bool
    choices: tuple[tuple[str, str], ...]
    custom: bool = False  # a free from/to window rather than a preset

    @property
    def label(self) -> str:
        if self.custom:
            return f"{self.since:%Y-%m-%d %H:%M} to {self.until:%Y-%m-%d %H:%M} UTC"
        return RANGES[self.key][0]

    @property
    def query(self) -> str:
        """The query that asks for this window again as the user asked for it: a live preset stays live, a
        pinned or free window stays put (links from one page of a drill-down to the next carry it)."""
        if self.custom:
            return self.permalink_query()
        if self.pinned:
            return urlencode({"range": self.key, "end": self.until.replace(microsecond=0).isoformat()})
        return urlencode({"range": self.key})

    def permalink_query(self, **extra: str) -> str:
        if self.custom:
            return urlencode({"from": _minute(self.since), "to": _minute(self.until), **extra})
        end = self.until.replace(microsecond=0).isoformat()
        return urlencode({"range": self.key, "end": end, **extra})


def _minute(moment: datetime) -> str:
    return f"{moment:%Y-%m-%dT%H:%M}"


def time_range(request: HttpRequest, default: str = "24h", allowed: tuple[str, ...] = tuple(RANGES)) -> TimeRange:
    key = request.GET.get("range", default)
    if key not in allowed:
        key = default
    if request.GET.get("from") or request.GET.get("to"):
        return _free_range(request, key, allowed)
    end = _pinned_end(request.GET.get("end", ""))
    now = timezone.now()
    pinned = end is not None and end < now
    until = end if pinned else now
    return TimeRange(key, until - RANGES[key][1], until, pinned, tuple((k, RANGES[k][0]) for k in allowed))


def _free_range(request: HttpRequest, key: str, allowed: tuple[str, ...]) -> TimeRange:
    """``from``/``to`` beside the presets: both needed, from before to, and no longer than the page's longest
    preset (what the page can read at its cost)."""
    texts = {name: request.GET.get(name, "") for name in ("from", "to")}
    for name, other in (("from", "to"), ("to", "from")):
        if not texts[name]:
            raise BadQuery(name, f"is needed with {other} (a window has both ends)", "")
    since, until = (_moment(name, texts[name]) for name in ("from", "to"))
    if since >= until:
        raise BadQuery("from", f"must be before to ({texts['to']})", texts["from"])
    longest = max(allowed, key=lambda k: RANGES[k][1])
    if until - since > RANGES[longest][1]:
        span = RANGES[longest][0].lower().replace("last ", "")
        raise BadQuery("to", f"may be at most {span} after from", texts["to"])
    choices = tuple((k, RANGES[k][0]) for k in allowed)
    return TimeRange(key, since, until, until < timezone.now(), choices, custom=True)


def _pinned_end(text: str) -> datetime | None:
    """The ``end`` of a permalink, aware; None when absent. An impossible date is a BadQuery, not a 500."""
    if not text:
        return None
    return _moment("end", text)


def _moment(parameter: str, text: str) -> datetime:
    """A date and time from the query, aware (UTC); an impossible one is a BadQuery naming ``parameter``."""
    try:
        end = parse_datetime(text)  # None when not ISO-like, ValueError when ISO-like but impossible
        if end is not None and timezone.is_naive(end):
            end = timezone.make_aware(end, timezone.get_current_timezone())
        if end is not None:
            end = end.astimezone(UTC)  # OverflowError at the edges of the calendar
    except (ValueError, OverflowError):
        end = None
    if end is None or end < EARLIEST_END:
        raise BadQuery(parameter, END_RULE, text)
    return end


class TableCsv(Exception):
    """A table's rows asked for as CSV (``?<prefix>export=csv``): raised by ``paginate`` wherever the table is
    configured and answered by ``ErrorPageMiddleware``, so every paginated table downloads without each view
    handling it."""

    def __init__(self, response: HttpResponse) -> None:
        super().__init__("table CSV")
        self.response = response


def export_field(table) -> str:
    return f"{table.prefix}export"


NUMBER = re.compile(r"[+-]?\d+(\.\d+)?")


def _csv_cell(value: object) -> str:
    # Columns that render links or badges give their HTML as their value: the sheet wants the words.
    text = "" if value is None else html.unescape(strip_tags(str(value))).strip()
    # A spreadsheet runs a cell starting with = + - @ as a formula: a team or job name must stay text.
    formula = text[:1] in ("=", "+", "-", "@", "\t", "\r") and not NUMBER.fullmatch(text)
    return "'" + text if formula else text


def table_csv(request: HttpRequest, table) -> HttpResponse:
    """Every row of the table (all pages, the current filters and order), as the columns show them."""
    name = request.resolver_match.url_name if request.resolver_match else "table"
    response = HttpResponse(content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = (
        f'attachment; filename="{name}{"-" + table.prefix.rstrip("-") if table.prefix else ""}.csv"'
    )
    writer = csv.writer(response)
    for row in table.as_values():
        writer.writerow([_csv_cell(value) for value in row])
    return response


def paginate(request: HttpRequest, table, per_page: int) -> None:
    """django-tables2's RequestConfig with the page size checked first: a negative ``per_page`` made it ask
    for page -1 (EmptyPage: a 500) and a huge one rendered every row. ``?<prefix>export=csv`` answers the
    table's rows as CSV instead of the page (``TableCsv``)."""
    asked_export = request.GET.get(export_field(table))
    if asked_export is not None:
        if asked_export != "csv":
            raise BadQuery(export_field(table), "the only export is csv", asked_export)
        RequestConfig(request, paginate=False).configure(table)
        raise TableCsv(table_csv(request, table))
    name = table.prefixed_per_page_field
    asked = request.GET.get(name)
    if asked is not None and not (WHOLE_NUMBER.fullmatch(asked) and 1 <= int(asked) <= MAX_PER_PAGE):
        raise BadQuery(name, f"must be a whole number from 1 to {MAX_PER_PAGE}", asked)
    RequestConfig(request, paginate={"per_page": per_page}).configure(table)


def require_fleet_plans(request: HttpRequest, page: str) -> None:
    """Pages about the whole fleet's plans are for members of some team and for portal admins
    (``scheduling.see_fleet_plans``)."""
    if not request.user.has_perm("scheduling.see_fleet_plans"):
        raise PermissionDenied(f"{page} is shown to members of a team and to portal admins.")


def posted_version(request: HttpRequest) -> int | None:
    """The version of the row a decision or edit was made on, from the page's hidden ``version`` field (None from
    an old page without it: unchecked); services/versions.py refuses one changed since."""
    value = request.POST.get("version", "")
    return int(value) if value.isascii() and value.isdigit() else None
