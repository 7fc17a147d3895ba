"""Helpers shared by the page views: the time-range selector and its permalink."""

from dataclasses import dataclass
from datetime import datetime, timedelta
from urllib.parse import urlencode

from django.core.exceptions import PermissionDenied
from django.http import HttpRequest
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from scheduling.models import Membership

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

    @property
    def label(self) -> str:
        return RANGES[self.key][0]

    def permalink_query(self, **extra: str) -> str:
        end = self.until.replace(microsecond=0).isoformat()
        return urlencode({"range": self.key, "end": end, **extra})


def time_range(request: HttpRequest, default: str = "24h", allowed: tuple[str, ...] = tuple(RANGES)) -> TimeRange:
    key = request.GET.get("range", default)
    if key not in allowed:
        key = default
    end = parse_datetime(request.GET.get("end", "") or "")
    if end is not None and timezone.is_naive(end):
        end = timezone.make_aware(end, timezone.get_current_timezone())
    now = timezone.now()
    pinned = end is not None and end < now
    until = end if pinned else now
    return TimeRange(key, until - RANGES[key][1], until, pinned, tuple((k, RANGES[k][0]) for k in allowed))


def base_url(request: HttpRequest) -> str:
    return request.build_absolute_uri("/")


def require_team_member(request: HttpRequest, page: str) -> None:
    """Pages about the whole fleet's plans are for members of some team and for portal admins."""
    user = request.user
    if not (user.is_staff or Membership.objects.filter(user=user).exists()):
        raise PermissionDenied(f"{page} is shown to members of a team and to portal admins.")
