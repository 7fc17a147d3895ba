"""Demand forecast: plain arrays in, plain data out (no Django, no clock), so it is tested without a DB.

Model (dynamic harmonic regression, Hyndman & Athanasopoulos, *Forecasting: Principles and Practice*
§12.1, the usual answer for hourly series with two seasonal periods):

    demand_t = level + trend·t + daily Fourier terms (period 24 h) + weekly Fourier terms (period 168 h) + e_t

fitted by least squares, with AR(1) errors ``e_t = φ·e_{t-1} + ε_t`` estimated from the residuals. The
forecast adds the decaying last residual (``φ^h·e_T``); the prediction interval combines the AR(1)
forecast error ``σ²_ε(1-φ^{2h})/(1-φ²)`` with the coefficients' own uncertainty. Weekly terms skip the
harmonics that repeat a daily one (every 7th), so the design matrix stays full rank.

Why not statsmodels: Holt-Winters there takes one seasonal period (we need 24 h *and* 168 h); its
``UnobservedComponents``/SARIMAX with Fourier regressors would give the same model through a Kalman
filter at ~100x the cost per series, and bring scipy, pandas and patsy (~150 MB) for one least-squares
solve that numpy already does.

History rules (never a crash, always a message): fewer than ``MIN_POINTS_DAILY`` usable hours -> no
forecast; fewer than ``MIN_POINTS_WEEKLY`` -> daily seasonality only, said so in ``message``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from statistics import NormalDist

import numpy as np

DAY_H = 24
WEEK_H = 168
DAILY_HARMONICS = 4
WEEKLY_HARMONICS = 12
MIN_POINTS_DAILY = 2 * DAY_H
MIN_POINTS_WEEKLY = 2 * WEEK_H
MAX_PHI = 0.98


@dataclass(frozen=True)
class Forecast:
    """One series' fit and forecast; hours are counted from the first history point."""

    ok: bool
    message: str
    history_points: int = 0
    horizon: int = 0
    fitted: tuple[float, ...] = ()
    mean: tuple[float, ...] = ()
    lower: tuple[float, ...] = ()
    upper: tuple[float, ...] = ()
    trend_per_day: float = 0.0
    level_now: float = 0.0
    seasonality: tuple[str, ...] = ()
    residual_sd: float = 0.0
    phi: float = 0.0
    coverage: float = 0.9
    weekly_profile: tuple[float, ...] = field(default=())  # 168 hourly values of the fitted seasonal shape


def fourier_design(
    hours: np.ndarray, *, daily: int, weekly: int, start_hour_of_week: int, trend: bool = True
) -> np.ndarray:
    """Columns: intercept, (trend in days), daily then weekly sine/cosine pairs (weekly harmonics that
    repeat a daily one skipped)."""
    how = (hours + start_hour_of_week) % WEEK_H
    columns = [np.ones_like(hours, dtype=float)]
    if trend:
        columns.append(hours / DAY_H)
    for k in range(1, daily + 1):
        angle = 2 * math.pi * k * how / DAY_H
        columns += [np.sin(angle), np.cos(angle)]
    for k in (k for k in range(1, weekly + 1) if k % 7):
        angle = 2 * math.pi * k * how / WEEK_H
        columns += [np.sin(angle), np.cos(angle)]
    return np.column_stack(columns)


def forecast_demand(
    values: Sequence[float | None], *, start_hour_of_week: int, horizon: int, coverage: float = 0.9
) -> Forecast:
    """Fit hourly ``values`` (None/NaN = no data that hour) and forecast ``horizon`` hours ahead."""
    y = np.array([np.nan if v is None else float(v) for v in values], dtype=float)
    usable = np.isfinite(y)
    count = int(usable.sum())
    if count < MIN_POINTS_DAILY:
        return Forecast(
            False,
            f"not enough history: {count} hours with data, a forecast needs at least {MIN_POINTS_DAILY} "
            f"(two days) for the daily pattern and {MIN_POINTS_WEEKLY} (two weeks) for the weekly one",
            history_points=count,
        )
    weekly = WEEKLY_HARMONICS if count >= MIN_POINTS_WEEKLY else 0
    seasonality = ("daily", "weekly") if weekly else ("daily",)
    message = (
        ""
        if weekly
        else (f"{count} hours of history: daily seasonality only (the weekly pattern needs {MIN_POINTS_WEEKLY} hours)")
    )
    hours = np.arange(len(y), dtype=float)
    design = fourier_design(hours, daily=DAILY_HARMONICS, weekly=weekly, start_hour_of_week=start_hour_of_week)
    # Normal equations on the small (columns x columns) matrix: numpy's SVD-based lstsq on the tall matrix
    # cost ~200 ms per series here, this a fraction of a millisecond; the inverse also gives the intervals.
    inverse = np.linalg.pinv(design[usable].T @ design[usable])
    beta = inverse @ (design[usable].T @ y[usable])
    fitted = design @ beta
    residuals = np.where(usable, y - fitted, np.nan)
    phi, innovation_sd, residual_sd = _ar1(residuals)
    future = np.arange(len(y), len(y) + horizon, dtype=float)
    future_design = fourier_design(
        future, daily=DAILY_HARMONICS, weekly=weekly, start_hour_of_week=start_hour_of_week
    )
    last_residual = residuals[usable][-1]
    steps = np.arange(1, horizon + 1, dtype=float)
    mean = future_design @ beta + last_residual * phi**steps
    ar_var = innovation_sd**2 * (1 - phi ** (2 * steps)) / (1 - phi**2) if phi < 1 else innovation_sd**2 * steps
    coef_var = residual_sd**2 * np.einsum("ij,jk,ik->i", future_design, inverse, future_design)
    z = NormalDist().inv_cdf(0.5 + coverage / 2)
    half = z * np.sqrt(ar_var + coef_var)
    seasonal_only = fourier_design(
        np.arange(WEEK_H, dtype=float), daily=DAILY_HARMONICS, weekly=weekly, start_hour_of_week=0, trend=False
    )
    profile = seasonal_only @ np.delete(beta, 1)  # the level plus the seasonal shape, Monday 00:00 first
    return Forecast(
        True,
        message,
        history_points=count,
        horizon=horizon,
        fitted=_round(fitted),
        mean=_round(np.maximum(mean, 0.0)),
        lower=_round(np.maximum(mean - half, 0.0)),
        upper=_round(np.maximum(mean + half, 0.0)),
        trend_per_day=float(beta[1]),
        level_now=float(beta[0] + beta[1] * (len(y) - 1) / DAY_H),
        seasonality=seasonality,
        residual_sd=residual_sd,
        phi=phi,
        coverage=coverage,
        weekly_profile=_round(profile),
    )


def _ar1(residuals: np.ndarray) -> tuple[float, float, float]:
    """(φ, innovation sd, residual sd) from the residuals, over consecutive hours that both have data."""
    finite = residuals[np.isfinite(residuals)]
    residual_sd = float(np.std(finite)) if finite.size else 0.0
    pairs = np.isfinite(residuals[1:]) & np.isfinite(residuals[:-1])
    if pairs.sum() < 3 or residual_sd == 0.0:
        return 0.0, residual_sd, residual_sd
    current, previous = residuals[1:][pairs], residuals[:-1][pairs]
    denominator = float(previous @ previous)
    phi = float(np.clip((current @ previous) / denominator, 0.0, MAX_PHI)) if denominator else 0.0
    innovation_sd = float(np.std(current - phi * previous))
    return phi, innovation_sd, residual_sd


def _round(values: np.ndarray) -> tuple[float, ...]:
    return tuple(round(float(v), 3) for v in values)


def days_until(level_now: float, trend_per_day: float, threshold: float, *, max_days: float = 365.0) -> float | None:
    """Days until a linear trend from ``level_now`` reaches ``threshold`` (0 if already there; None: not
    within ``max_days`` or never, because demand is flat or falling)."""
    if level_now >= threshold:
        return 0.0
    if trend_per_day <= 0:
        return None
    days = (threshold - level_now) / trend_per_day
    return days if days <= max_days else None
