"""The forecast on synthetic series with known seasonality (no database)."""

import math

import numpy as np
import pytest

from scheduling.forecasting import MIN_POINTS_DAILY, MIN_POINTS_WEEKLY, days_until, forecast_demand

WEEK = 168


def truth(hour: int, *, trend_per_hour: float = 0.02) -> float:
    """Weekday business hours +30 GPUs, a daily sine of 10, level 40, a slow upward trend (hour 0 = Monday 00:00)."""
    how = hour % WEEK
    day, hour_of_day = divmod(how, 24)
    business = 30.0 if day < 5 and 8 <= hour_of_day < 20 else 0.0
    return 40 + business + 10 * math.sin(2 * math.pi * hour_of_day / 24) + trend_per_hour * hour


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_forecast_recovers_the_daily_and_weekly_pattern_and_its_intervals_hold_the_truth(seed):
    rng = np.random.default_rng(seed)
    history = [truth(h) + rng.normal(0, 4) for h in range(4 * WEEK)]
    fit = forecast_demand(history, start_hour_of_week=0, horizon=WEEK)
    assert fit.ok and fit.seasonality == ("daily", "weekly")
    expected = np.array([truth(h) for h in range(4 * WEEK, 5 * WEEK)])
    mean = np.array(fit.mean)
    # The pattern has 30-GPU steps and a 10-GPU daily swing; the forecast follows it within a few GPUs.
    assert np.sqrt(np.mean((mean - expected) ** 2)) < 6.0
    weekday_noon, sunday_noon = mean[2 * 24 + 12], mean[6 * 24 + 12]
    assert weekday_noon - sunday_noon == pytest.approx(30, abs=6)
    assert fit.trend_per_day == pytest.approx(0.48, abs=0.25)
    observed = expected + rng.normal(0, 4, WEEK)
    inside = np.mean((observed >= np.array(fit.lower)) & (observed <= np.array(fit.upper)))
    assert inside >= 0.8  # a 90 % interval, most of the time


def test_the_forecast_respects_where_the_history_starts_in_the_week():
    rng = np.random.default_rng(7)
    offset = 3 * 24 + 5  # the history starts on a Thursday at 05:00
    history = [truth(h + offset, trend_per_hour=0) + rng.normal(0, 2) for h in range(3 * WEEK)]
    fit = forecast_demand(history, start_hour_of_week=offset, horizon=48)
    expected = [truth(h + offset, trend_per_hour=0) for h in range(3 * WEEK, 3 * WEEK + 48)]
    assert np.mean(np.abs(np.array(fit.mean) - expected)) < 4  # off only at the hard 30-GPU steps
    assert fit.weekly_profile[2 * 24 + 12] - fit.weekly_profile[6 * 24 + 12] == pytest.approx(30, abs=6)


def test_hours_without_data_are_left_out_of_the_fit_not_taken_as_zero_demand():
    rng = np.random.default_rng(5)
    history: list[float | None] = [truth(h) + rng.normal(0, 2) for h in range(3 * WEEK)]
    for h in range(100, 160):
        history[h] = None
    fit = forecast_demand(history, start_hour_of_week=0, horizon=24)
    assert fit.ok and fit.history_points == 3 * WEEK - 60
    expected = [truth(h) for h in range(3 * WEEK, 3 * WEEK + 24)]
    assert np.mean(np.abs(np.array(fit.mean) - expected)) < 4


def test_less_than_two_days_gives_a_message_instead_of_a_forecast():
    fit = forecast_demand([5.0] * (MIN_POINTS_DAILY - 1), start_hour_of_week=0, horizon=24)
    assert not fit.ok and "not enough history" in fit.message and fit.mean == ()
    assert not forecast_demand([], start_hour_of_week=0, horizon=24).ok
    assert not forecast_demand([None] * 500, start_hour_of_week=0, horizon=24).ok


def test_less_than_two_weeks_forecasts_with_the_daily_pattern_only_and_says_so():
    history = [truth(h, trend_per_hour=0) for h in range(MIN_POINTS_WEEKLY - 24)]
    fit = forecast_demand(history, start_hour_of_week=0, horizon=24)
    assert fit.ok and fit.seasonality == ("daily",) and "daily seasonality only" in fit.message


def test_a_constant_series_forecasts_itself_with_a_zero_width_interval():
    fit = forecast_demand([12.0] * (3 * WEEK), start_hour_of_week=0, horizon=48)
    assert fit.mean == pytest.approx([12.0] * 48, abs=1e-6)
    assert np.allclose(fit.upper, fit.lower, atol=1e-6)


def test_days_until_a_threshold_follows_the_trend():
    assert days_until(10, 2, 30) == 10
    assert days_until(40, 2, 30) == 0
    assert days_until(10, 0, 30) is None and days_until(10, -1, 30) is None
    assert days_until(10, 0.01, 30, max_days=365) is None
