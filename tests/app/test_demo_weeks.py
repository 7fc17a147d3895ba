"""The demo's weeks are different weeks of the shipped Philly trace (issue 33 item 12): with one shipped week
looped, every real week replayed the same jobs and each weekly report read "week over week 0.0"."""

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scheduling.demo import trace
from scheduling.demo.trace import EPOCH_S, WEEK_S
from scheduling.models import CapacityReport
from scheduling.services import demo, report_delivery


def _week(n: int, speedup: float = 6.0) -> list[trace.DemoJob]:
    return trace.arrivals(EPOCH_S + n * WEEK_S, EPOCH_S + (n + 1) * WEEK_S, speedup)


def _gpu_hours(jobs: list[trace.DemoJob]) -> float:
    return sum(job.gpus * job.duration_s for job in jobs) / 3600


def _shipped_week(job: trace.DemoJob) -> str:
    return job.external_id.split("-")[1]


def test_the_shipped_trace_holds_six_different_weeks():
    weeks = trace.trace_weeks()
    assert len(weeks) == 6
    assert all(0 <= row.offset_s < WEEK_S for week in weeks for row in week)
    assert len({(len(week), sum(row.gpus * row.duration_s for row in week)) for week in weeks}) == 6


def test_six_consecutive_real_weeks_replay_six_different_trace_weeks_then_loop():
    weeks = [_week(n) for n in range(7)]
    played = [{_shipped_week(job) for job in jobs} for jobs in weeks]
    assert all(len(one) == 1 for one in played)  # a real week replays one trace week (six times at speedup 6)
    assert len(set().union(*played[:6])) == 6
    demand = [round(_gpu_hours(jobs), 1) for jobs in weeks]
    assert all(demand[n] != demand[n + 1] for n in range(5)), demand  # week over week is never 0
    assert played[6] == played[0] and demand[6] == demand[0]  # the seventh week starts the loop again


@settings(max_examples=40, deadline=None)
@given(
    start=st.floats(min_value=-3 * WEEK_S, max_value=20 * WEEK_S),
    cut=st.floats(min_value=0, max_value=1),
    span=st.floats(min_value=1, max_value=WEEK_S / 2),
    speedup=st.sampled_from([0.5, 1.0, 2.5, 6.0, 60.0]),
)
def test_arrivals_split_anywhere_are_the_same_jobs_once(start, cut, span, speedup):
    """Rounds of any length see every job exactly once, whatever week boundaries fall inside them."""
    low, high = EPOCH_S + start, EPOCH_S + start + span
    middle = low + cut * span
    whole = trace.arrivals(low, high, speedup)
    pieces = trace.arrivals(low, middle, speedup) + trace.arrivals(middle, high, speedup)
    assert [job.external_id for job in pieces] == [job.external_id for job in whole]
    assert len({job.external_id for job in whole}) == len(whole)
    assert all(low < job.submitted_at <= high + 1e-6 for job in whole)


@pytest.mark.django_db
def test_the_demos_weekly_reports_change_week_over_week(settings):
    """Three weeks of demo history at the demo's own speed-up: the first fills an empty fleet, so the third
    week's report is the first whose previous week also ran warm (with one shipped week it read 0.0)."""
    settings.TIME_ZONE = "UTC"
    now = datetime.fromtimestamp(EPOCH_S, tz=UTC) + timedelta(weeks=3, hours=1)
    demo.create_demo_federation()
    demo.fill_history(days=21.1, step_s=3600, now=now)
    reports = report_delivery.build_finished_weeks(since=now - timedelta(days=21.1), now=now)
    assert [r.period_start.date().isoformat() for r in reports] == ["2026-01-05", "2026-01-12", "2026-01-19"]
    third = CapacityReport.objects.get(pk=reports[-1].pk)
    changes = {row["key"]: row["change"] for row in third.content["sections"]["trend"]["rows"]}
    assert changes["allocated_h"] not in (None, 0)
    assert changes["pending_h"] not in (None, 0)
