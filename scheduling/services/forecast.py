"""Demand forecast per team and per orchestrator from the recorded hourly rollups, and the guarantee outlook.

Plain data out: the weekly capacity report calls ``guarantee_exhaustion(as_of)`` for its "at this growth,
<team> exhausts its guarantee on <date>" lines; the forecast page draws ``demand_forecasts``.
The numbers come from ``scheduling.forecasting`` (no Django); this module only reads history and dates it.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, replace
from datetime import date, datetime, timedelta
from zoneinfo import ZoneInfo

from django.conf import settings
from django.core.cache import cache
from django.db import connection
from django.db.models import BigIntegerField, Count, Max, Sum
from django.db.models.functions import Cast
from django.utils import timezone

from scheduling.forecasting import Forecast, days_until, forecast_demand
from scheduling.models import Orchestrator, Queue, QuotaGrant, Team, UsageRollup
from scheduling.selectors.planning import DemandHistory, floor_hour, hourly_demand
from scheduling.selectors.pool_policies import local_moment
from scheduling.services import table_changes
from scheduling.wording import possessive

HISTORY_WEEKS = 8
HORIZON_HOURS = 14 * 24
OUTLOOK_DAYS = 365
CACHE_SECONDS = 3600  # a forecast only changes when a closed hour's rollups or the team tree change


@dataclass(frozen=True)
class SeriesForecast:
    key: str
    label: str
    history_hours: list[datetime]
    history: list[float | None]
    future_hours: list[datetime]
    forecast: Forecast


@dataclass(frozen=True)
class ForecastSet:
    as_of: datetime
    teams: list[SeriesForecast]
    orchestrators: list[SeriesForecast]


@dataclass(frozen=True)
class Exhaustion:
    """One team's guarantee outlook: ``on`` is the date its mean demand reaches the guarantee (None: not
    within a year at the current trend, or no forecast); ``sentence`` says it in words."""

    team: str
    name: str
    guaranteed: float
    level_now: float
    trend_per_day: float
    on: date | None
    sentence: str
    forecast: SeriesForecast


def hour_of_week(moment: datetime) -> int:
    weekday, minute = local_moment(moment)
    return (weekday - 1) * 24 + minute // 60


def _forecast_all(history: DemandHistory, names: dict[str, str], series: dict[str, list[float | None]]):
    start = hour_of_week(history.hours[0]) if history.hours else 0
    last = history.hours[-1] if history.hours else None
    future = [last + timedelta(hours=i + 1) for i in range(HORIZON_HOURS)] if last else []
    return [
        SeriesForecast(
            key,
            names.get(key, key),
            history.hours,
            values,
            future,
            forecast_demand(values, start_hour_of_week=start, horizon=HORIZON_HOURS),
        )
        for key, values in sorted(series.items())
    ]


def demand_forecasts(
    as_of: datetime | None = None, teams: set[str] | None = None, *, orchestrators: bool = True
) -> ForecastSet:
    """Every team's (or the ``teams`` slugs') and every orchestrator's forecast from the last weeks of rollups."""
    as_of = as_of or timezone.now()
    until = floor_hour(as_of)
    since = until - timedelta(weeks=HISTORY_WEEKS)
    key = _cache_key(since, until, teams, orchestrators)
    cached = cache.get(key)
    if cached is not None:
        table_changes.note_reads(READ_TABLES)  # a page around it depends on what it was computed from
        return replace(cached, as_of=as_of)
    ids = None if teams is None else set(Team.objects.filter(slug__in=teams).values_list("pk", flat=True))
    history = hourly_demand(since, until, ids)
    result = ForecastSet(
        as_of,
        _forecast_all(history, history.team_names, history.by_team),
        _forecast_all(history, {}, history.by_orchestrator) if orchestrators else [],
    )
    cache.set(key, result, CACHE_SECONDS)
    return result


KEY_TABLES = (UsageRollup._meta.db_table, Team._meta.db_table)
# What a forecast is computed from: the key's tables and the orchestrators, whose names only label the pools'
# series (left out of the key: collector rounds write that table every 30 s).
READ_TABLES = (*KEY_TABLES, Orchestrator._meta.db_table)


def _cache_key(since: datetime, until: datetime, teams: set[str] | None, orchestrators: bool) -> str:
    """Names the inputs of one forecast: the window, the teams asked for, and fingerprints of the hourly
    rollups in the window and of the team tree, so a rewritten hour or a moved team is a new key."""
    inputs = repr(
        (since, until, sorted(teams) if teams is not None else None, orchestrators, _fingerprint(since, until))
    )
    return "forecast:" + hashlib.sha256(inputs.encode()).hexdigest()


def _fingerprint(since: datetime, until: datetime) -> object:
    """On PostgreSQL the rollup and team tables' generations (one indexed read: any committed write moves them);
    inside a transaction (its own uncommitted writes would not count) or elsewhere, the window's rollups summed
    and the tree listed, which costs a scan of the whole history window of rollups."""
    if not connection.in_atomic_block and table_changes.readiness() == "ok":
        return table_changes.generations(KEY_TABLES)
    rollups = UsageRollup.objects.filter(
        resolution=UsageRollup.Resolution.HOUR, period_start__gte=since, period_start__lt=until
    ).aggregate(  # integer sums: a float sum's last digits vary with the database's summation order
        rows=Count("id"),
        last=Max("id"),
        allocated=Sum(Cast("gpu_s_allocated", BigIntegerField())),
        pending=Sum(Cast("gpu_s_pending", BigIntegerField())),
    )
    return rollups, list(Team.objects.order_by("pk").values_list("pk", "parent_id", "slug", "name"))


def guarantees(as_of: datetime) -> dict[str, float]:
    """Each team's guaranteed GPUs (any-model queue) plus its grants in force at ``as_of``."""
    result = {q.team.slug: float(q.guaranteed) for q in Queue.objects.filter(gpu_model="").select_related("team")}
    grants = (
        QuotaGrant.objects.filter(state=QuotaGrant.State.ACTIVE, starts_at__lte=as_of, ends_at__gt=as_of)
        .values("team__slug")
        .annotate(gpus=Sum("gpus"))
    )
    for row in grants:
        result[row["team__slug"]] = result.get(row["team__slug"], 0.0) + row["gpus"]
    return result


def guarantee_exhaustion(as_of: datetime | None = None, teams: set[str] | None = None) -> list[Exhaustion]:
    """Per team with a guarantee: when, at the fitted growth, its mean demand reaches that guarantee."""
    return outlook(demand_forecasts(as_of, teams, orchestrators=False))


def outlook(forecasts: ForecastSet, guaranteed: dict[str, float] | None = None) -> list[Exhaustion]:
    """``guarantee_exhaustion`` for forecasts already made (the forecast page draws the same ones);
    ``guaranteed`` is ``guarantees(forecasts.as_of)`` when the caller has it already."""
    guaranteed = guarantees(forecasts.as_of) if guaranteed is None else guaranteed
    today = forecasts.as_of.astimezone(ZoneInfo(settings.TIME_ZONE)).date()
    return [
        _exhaustion(series, guaranteed[series.key], today)
        for series in forecasts.teams
        if guaranteed.get(series.key, 0) > 0
    ]


def _exhaustion(series: SeriesForecast, guaranteed: float, today: date) -> Exhaustion:
    fit = series.forecast
    if not fit.ok:
        return Exhaustion(
            series.key, series.label, guaranteed, 0.0, 0.0, None, f"{series.label}: {fit.message}", series
        )
    days = days_until(fit.level_now, fit.trend_per_day, guaranteed, max_days=OUTLOOK_DAYS)
    growth = f"{fit.trend_per_day:+.2f} GPUs/day"
    if days is None:
        on, sentence = (
            None,
            (
                f"At this growth ({growth}), {series.label} does not exhaust its guarantee of {guaranteed:g} GPUs "
                f"within {OUTLOOK_DAYS} days (mean demand now {fit.level_now:.1f} GPUs)."
            ),
        )
    elif days == 0:
        on, sentence = (
            today,
            (
                f"{possessive(series.label)} mean demand ({fit.level_now:.1f} GPUs) already exceeds its guarantee of "
                f"{guaranteed:g} GPUs: it relies on burst capacity."
            ),
        )
    else:
        on = today + timedelta(days=int(days))
        sentence = (
            f"At this growth ({growth}), {series.label} exhausts its guarantee of {guaranteed:g} GPUs on {on:%Y-%m-%d}."
        )
    return Exhaustion(series.key, series.label, guaranteed, fit.level_now, fit.trend_per_day, on, sentence, series)
