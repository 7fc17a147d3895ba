"""Property tests of one source's completeness over a week (issue 36 item 10): whatever its registration and
scrapes, it is judged only over the part of the week it existed, never stale longer than that part."""

from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from scheduling.reports.capacity import Window, _source_completeness
from scheduling.selectors.report import SourceRuns

START = datetime(2026, 11, 16, tzinfo=UTC)
WEEK = Window(START, START + timedelta(days=7), "UTC")
HOURS = 7 * 24.0
moments = st.integers(min_value=-3 * 24 * 60, max_value=10 * 24 * 60).map(lambda m: START + timedelta(minutes=m))
scrapes = st.lists(st.tuples(moments, st.booleans()), max_size=40).map(sorted)


@settings(max_examples=300, deadline=None)
@given(registered=st.none() | moments, runs=scrapes, last_ok_before=st.none() | moments)
def test_a_source_is_judged_only_over_the_part_of_the_week_it_existed(registered, runs, last_ok_before):
    inside = [(at, ok) for at, ok in runs if WEEK.start <= at < WEEK.end]
    before = last_ok_before if last_ok_before is None or last_ok_before < WEEK.start else None
    row = _source_completeness(WEEK, SourceRuns("src", "slurm", before, inside, registered), 600)
    existed_from = WEEK.start if registered is None else min(max(registered, WEEK.start), WEEK.end)
    assert row.judged_h == round((WEEK.end - existed_from).total_seconds() / 3600, 6)
    assert 0 <= row.longest_stale_h <= row.stale_h <= row.judged_h + 1e-9 <= HOURS + 1e-9
    assert (row.registered_on is not None) == (registered is not None and registered > WEEK.start)
    if row.judged_h == 0:
        assert row.stale_h == 0 and row.fresh_pct is None
    else:
        assert 0 <= row.fresh_pct <= 100
