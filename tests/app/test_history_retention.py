"""Raw scrape rows are pruned after the period an admin sets (audited, validated); rollups stay, and pages read
them for old periods, so a page shows the same numbers for an old window before and after its raw rows go."""

import json
import re
from datetime import timedelta

import pytest
from django.core.exceptions import ValidationError
from django.urls import reverse
from django.utils import timezone

from scheduling import tasks
from scheduling.models import (
    CollectorRun,
    EnforcementOutcome,
    EnforcementRun,
    FragmentationSample,
    HistoryRetention,
    UsageRollup,
    UsageSample,
)
from scheduling.selectors import retention as retention_reads
from scheduling.services import retention
from scheduling.services.metrics import refresh_rollups

pytestmark = pytest.mark.django_db
STEP = timedelta(minutes=5)
FIGURE = re.compile(r'<script type="application/json" id="chart-\d+-figure">(.*?)</script>', re.S)


def _raw_rows(orchestrator, at, allocated: float = 8.0) -> None:
    UsageSample.objects.create(
        taken_at=at, orchestrator=orchestrator, gpus_total=64, gpus_allocated=allocated, interval_s=300
    )
    FragmentationSample.objects.create(taken_at=at, gpus_free=8, gpus_fragmented=1, largest_gang=8)
    CollectorRun.objects.create(orchestrator=orchestrator, started_at=at, ok=True)
    run = EnforcementRun.objects.create(started_at=at, finished_at=at)
    EnforcementOutcome.objects.create(run=run, orchestrator=orchestrator, mode="auto")


def _raw_counts() -> dict[str, int]:
    return {
        model._meta.model_name: model.objects.count()
        for model in (UsageSample, FragmentationSample, CollectorRun, EnforcementRun, EnforcementOutcome)
    }


def test_prune_deletes_only_raw_rows_older_than_the_period_in_batches_and_keeps_every_rollup(orchestrator, cast):
    now = timezone.now()
    retention.set_raw_days(10, by=cast["admin"], reason="ten days of raw rows are enough here")
    for days in (30, 12, 11):
        _raw_rows(orchestrator, now - timedelta(days=days))
    for days in (9, 1):
        _raw_rows(orchestrator, now - timedelta(days=days))
    refresh_rollups(now - timedelta(days=31), now)
    rollups = sorted(UsageRollup.objects.values_list("resolution", "period_start", "gpu_s_allocated"))
    assert len(rollups) == 10  # an hour and a day for each of the five moments

    deleted = retention.prune_raw(now, batch=2)  # three old rows per table: two batches each

    assert deleted == {
        "usagesample": 3, "fragmentationsample": 3, "collectorrun": 3, "enforcementrun": 3,
    }  # fmt: skip
    assert _raw_counts() == {
        "usagesample": 2, "fragmentationsample": 2, "collectorrun": 2, "enforcementrun": 2, "enforcementoutcome": 2
    }
    assert UsageSample.objects.filter(taken_at__lt=now - timedelta(days=10)).count() == 0
    assert sorted(UsageRollup.objects.values_list("resolution", "period_start", "gpu_s_allocated")) == rollups
    assert retention_reads.pruned_before() == now - timedelta(days=10)
    assert retention.prune_raw(now) == dict.fromkeys(deleted, 0)  # nothing left to prune: safe to run again


def test_a_rollup_rebuild_after_a_prune_leaves_the_pruned_periods_as_they_were(orchestrator):
    now = timezone.now()
    old = now - timedelta(days=20)
    for minutes in range(0, 120, 5):
        _raw_rows(orchestrator, old + timedelta(minutes=minutes), allocated=16)
    refresh_rollups(old, old + timedelta(hours=2))
    before = sorted(UsageRollup.objects.values_list("resolution", "period_start", "gpu_s_allocated", "covered_s"))
    retention.prune_raw(now)
    # A late source (slurmdbd back after an outage) asks for the old window again: its samples are gone.
    refresh_rollups(old, now)
    after = sorted(UsageRollup.objects.values_list("resolution", "period_start", "gpu_s_allocated", "covered_s"))
    assert [row for row in after if row[1] < old + timedelta(hours=3)] == before


def test_a_new_period_is_recorded_with_who_and_why(cast):
    retention.set_raw_days(30, by=cast["admin"], reason="auditors want a month of raw scrapes")
    retention.set_raw_days("45", by=cast["admin"], reason="and then six weeks")
    row = HistoryRetention.objects.get()
    assert row.raw_days == 45 and retention_reads.raw_days() == 45
    rows = row.history.order_by("history_date")
    history = list(rows.values_list("raw_days", "history_user", "history_change_reason"))
    assert history == [
        (30, cast["admin"].pk, "auditors want a month of raw scrapes"),
        (45, cast["admin"].pk, "and then six weeks"),
    ]


@pytest.mark.parametrize("days", [0, 7, 367, -3, "two weeks", None])
def test_a_bad_period_is_refused_naming_the_field_and_the_rule_and_nothing_changes(cast, days):
    retention.set_raw_days(30, by=cast["admin"], reason="a month")
    with pytest.raises(ValidationError) as refused:
        retention.set_raw_days(days, by=cast["admin"], reason="shorter")
    errors = refused.value.message_dict
    assert list(errors) == ["raw_days"]
    assert any("from 8 to 366" in message for message in errors["raw_days"]), errors
    assert HistoryRetention.objects.get().raw_days == 30 and HistoryRetention.history.count() == 1


def test_a_period_without_a_reason_is_refused(cast):
    with pytest.raises(ValidationError) as refused:
        retention.set_raw_days(30, by=cast["admin"], reason="  ")
    assert list(refused.value.message_dict) == ["reason"]
    assert not HistoryRetention.objects.exists()


def test_the_admin_sets_the_period_with_a_reason_and_sees_the_rule_on_a_bad_one(client, cast):
    client.force_login(cast["admin"])
    add = reverse("admin:scheduling_historyretention_add")
    refused = client.post(add, {"raw_days": "3", "change_reason": "save room"})
    assert refused.status_code == 200 and not HistoryRetention.objects.exists()
    assert "raw_days must be a whole number of days from 8 to 366" in refused.content.decode()
    saved = client.post(add, {"raw_days": "60", "change_reason": "two months for the audit"})
    assert saved.status_code == 302
    row = HistoryRetention.objects.get()
    assert (row.pk, row.raw_days) == (1, 60)
    assert row.history.get().history_change_reason == "two months for the audit"
    assert row.history.get().history_user == cast["admin"]


def test_the_beat_prunes_raw_history_every_hour_through_the_task(orchestrator, settings):
    entry = settings.CELERY_BEAT_SCHEDULE["prune-raw-history"]
    assert entry["task"] == tasks.prune_raw_history.name
    _raw_rows(orchestrator, timezone.now() - timedelta(days=15))  # past the default 14 days
    _raw_rows(orchestrator, timezone.now() - timedelta(days=13))
    assert tasks.prune_raw_history.apply().get()["usagesample"] == 1
    assert UsageSample.objects.count() == 1


def _figures(response) -> list[dict]:
    assert response.status_code == 200
    return [json.loads(text)["data"] for text in FIGURE.findall(response.content.decode())]


def _traces(figures: list[list[dict]]) -> dict[str, list[tuple[str, float]]]:
    return {
        trace["name"]: list(zip(trace["x"], trace["y"], strict=True))
        for figure in figures
        for trace in figure
        if "name" in trace and isinstance(trace.get("x"), list)
    }


def test_an_old_window_shows_the_same_numbers_after_its_raw_rows_are_pruned(client, cast, orchestrator, teams):
    """A six-hour window three weeks back: its chart must not change (nor empty) when its raw rows are pruned."""
    end = (timezone.now() - timedelta(days=21)).replace(minute=0, second=0, microsecond=0)
    moment = end - timedelta(hours=7)
    while moment < end + timedelta(hours=1):
        hour = (moment - end) // timedelta(hours=1) + 8  # 1 … 8, the same all hour
        UsageSample.objects.create(
            taken_at=moment, orchestrator=orchestrator, gpus_total=64, gpus_allocated=4 * hour, interval_s=300
        )
        UsageSample.objects.create(
            taken_at=moment, orchestrator=orchestrator, team=teams["nlp"], gpus_allocated=2 * hour, interval_s=300
        )
        moment += STEP
    refresh_rollups(end - timedelta(hours=7), end + timedelta(minutes=55))
    client.force_login(cast["admin"])
    window = {"range": "6h", "end": end.isoformat()}
    pages = (reverse("overview"), reverse("team-detail", args=["research"]))
    before = [_traces(_figures(client.get(page, window))) for page in pages]

    retention.prune_raw()
    assert not UsageSample.objects.exists()

    after = [_traces(_figures(client.get(page, window))) for page in pages]
    assert after == before
    allocated = [y for _x, y in after[0]["slurm-a allocated"]]
    assert allocated == [8.0, 12.0, 16.0, 20.0, 24.0, 28.0, 32.0]  # the hourly averages, 6 h before `end` to `end`
    assert [y for _x, y in after[1]["NLP"]] == [4.0, 6.0, 8.0, 10.0, 12.0, 14.0, 16.0]


def test_an_old_weeks_report_judges_its_sources_from_rollups_once_their_runs_are_pruned(orchestrator, settings):
    """The weekly report's completeness (each source's scrapes) for a week whose collector runs were pruned: the
    same figures from the hourly rollups as from the runs, a two-hour outage included."""
    from scheduling.reports import capacity as capacity_report
    from scheduling.selectors.report import WeekReads

    reads = WeekReads(outlook=lambda _at: ())

    settings.GPUPORTAL_ROUND_SECONDS = 300
    settings.GPUPORTAL_REPORT_STALE_AFTER_S = 600
    window = capacity_report.week_before(timezone.now() - timedelta(days=21))
    orchestrator.history.update(history_date=window.start - timedelta(days=30))  # registered long before
    outage = (window.start + timedelta(days=2, hours=10), window.start + timedelta(days=2, hours=12))
    moment, samples, runs = window.start, [], []
    while moment < window.end:
        if not outage[0] <= moment < outage[1]:
            samples.append(UsageSample(taken_at=moment, orchestrator=orchestrator, gpus_total=64, interval_s=300))
            runs.append(CollectorRun(orchestrator=orchestrator, started_at=moment, ok=True))
        moment += STEP
    UsageSample.objects.bulk_create(samples)
    CollectorRun.objects.bulk_create(runs)
    refresh_rollups(window.start, window.end - timedelta(minutes=1))
    before = capacity_report.completeness_section(window, {}, reads)

    retention.prune_raw()
    assert not CollectorRun.objects.exists()

    after = capacity_report.completeness_section(window, {}, reads)
    assert after == before
    (source,) = after.sources
    assert source.stale_h == pytest.approx(115 / 60, abs=0.01)  # 10:05 (the last round + 10 min) to 12:00
