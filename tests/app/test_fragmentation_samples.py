"""Fragmentation samples: one per collection round, read back by the trend instead of re-scoring history.

The fleet fixture is eight idle 8-GPU nodes (64 GPUs). With no work running or pending the request-size
mix is the default 1/2/4/8 GPUs, equally likely: a node with one free GPU has that GPU unusable by three
sizes of four, so it counts 0.75 fragmented GPUs.
"""

import io
from datetime import timedelta

import pytest
from django.core.management import CommandError, call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from scheduling import tasks
from scheduling.models import FragmentationSample, Node, Workload
from scheduling.selectors.fragmentation_trend import fragmentation_trend
from scheduling.services.fragmentation import (
    backfill_fragmentation,
    record_fragmentation_sample,
)
from scheduling.services.retention import prune_raw

pytestmark = pytest.mark.django_db


def _fill(fleet, nodes: int, allocated: int) -> None:
    Node.objects.filter(pk__in=[n.pk for n in fleet[:nodes]]).update(gpu_allocated=allocated, state="mixed")


def _sample(at, fragmented: float, free: float = 40.0, placeable: dict | None = None) -> FragmentationSample:
    placeable = placeable or {"1": int(free), "8": int(free) // 8}
    return FragmentationSample.objects.create(
        taken_at=at, gpus_free=free, gpus_fragmented=fragmented, largest_gang=8, placeable=placeable
    )


def test_a_round_stores_the_fleets_fragmentation_largest_gang_and_placeable_counts(fleet):
    _fill(fleet, nodes=4, allocated=7)  # four nodes with one free GPU each, four idle nodes
    sample = record_fragmentation_sample()
    stored = FragmentationSample.objects.get()
    assert stored.pk is not None and stored.taken_at == sample.taken_at
    assert stored.gpus_free == 36
    assert stored.gpus_fragmented == pytest.approx(3.0)
    assert stored.placeable == {"1": 36, "2": 16, "4": 8, "8": 4, "16": 2, "32": 1, "64": 0}
    assert stored.largest_gang == 32
    assert stored.replayed is False


def test_a_retried_round_stores_no_second_sample(fleet):
    now = timezone.now()
    assert record_fragmentation_sample(now) is not None
    assert record_fragmentation_sample(now + timedelta(seconds=5)) is None
    assert FragmentationSample.objects.count() == 1
    assert record_fragmentation_sample(now + timedelta(seconds=30)) is not None
    assert FragmentationSample.objects.count() == 2


def test_the_celery_round_stores_a_sample(fleet, settings):
    settings.CELERY_TASK_ALWAYS_EAGER = True
    tasks.run_round.delay().get()
    assert FragmentationSample.objects.count() == 1


def test_the_trend_reads_stored_samples_not_workload_placements(fleet):
    now = timezone.now()
    for hours in range(25):
        _sample(now - timedelta(hours=hours), fragmented=float(hours))
    # A placement that a replay would count; the stored samples must win over it.
    Workload.objects.create(
        orchestrator=fleet[0].orchestrator,
        external_id="w1",
        submitted_at=now - timedelta(days=2),
        started_at=now - timedelta(days=2),
        state="running",
        gang_size=1,
        gpus_per_member=7,
        nodes=[{"node": "dgx00", "gpus": list(range(7))}],
    )
    trend = fragmentation_trend(now - timedelta(hours=23), now, points=24)
    assert len(trend) == 24
    assert [p.fragmented for p in trend] == [float(h) for h in range(23, -1, -1)]
    assert trend[-1].free == 40.0 and trend[-1].placeable == {1: 40, 8: 5}


def test_history_before_the_first_sample_is_replayed_from_placements(fleet):
    now = timezone.now()
    _sample(now - timedelta(minutes=30), fragmented=9.0)
    Workload.objects.create(
        orchestrator=fleet[0].orchestrator,
        external_id="w1",
        submitted_at=now - timedelta(hours=12),
        started_at=now - timedelta(hours=10, minutes=30),
        finished_at=now - timedelta(hours=2, minutes=30),
        state="completed",
        gang_size=1,
        gpus_per_member=7,
        nodes=[{"node": "dgx00", "gpus": list(range(7))}],
    )
    trend = fragmentation_trend(now - timedelta(hours=12), now, points=13)
    by_hours_ago = {round((now - p.at).total_seconds() / 3600): p for p in trend}
    assert by_hours_ago[12].free == 64 and by_hours_ago[12].fragmented == 0
    assert by_hours_ago[10].free == 57 and by_hours_ago[10].fragmented == pytest.approx(0.75)
    assert by_hours_ago[3].free == 57
    assert by_hours_ago[2].free == 64
    assert by_hours_ago[0].fragmented == 9.0  # the stored sample


def test_a_gap_in_collection_after_samples_began_is_left_out_not_invented(fleet):
    now = timezone.now()
    _sample(now - timedelta(hours=20), fragmented=1.0)
    _sample(now, fragmented=2.0)
    trend = fragmentation_trend(now - timedelta(hours=23), now, points=24)
    # -23..-21 h: before the first sample, replayed (nothing ran: 0); -20 and -19 h: the -20 h sample (a
    # sample stands for one step after it); -18..-1 h: no sample, no point; now: the latest sample.
    hours_ago = [round((now - p.at).total_seconds() / 3600) for p in trend]
    assert hours_ago == [23, 22, 21, 20, 19, 0]
    assert [p.fragmented for p in trend] == [0.0, 0.0, 0.0, 1.0, 1.0, 2.0]


def test_backfill_stores_replayed_samples_only_where_none_exist_and_can_run_again(fleet):
    now = timezone.now()
    _sample(now - timedelta(hours=1), fragmented=4.0)
    written = backfill_fragmentation(now - timedelta(hours=3), now, timedelta(minutes=30))
    assert written == 6  # 7 half-hour moments; the one at the stored sample (within 15 minutes) skipped
    assert FragmentationSample.objects.filter(replayed=True).count() == 6
    assert backfill_fragmentation(now - timedelta(hours=3), now, timedelta(minutes=30)) == 0
    assert FragmentationSample.objects.get(replayed=False).gpus_fragmented == 4.0


def test_the_backfill_command_names_the_bad_option(fleet):
    with pytest.raises(CommandError, match="--step-minutes must be greater than 0"):
        call_command("backfill_fragmentation", step_minutes=0, stdout=io.StringIO())
    with pytest.raises(CommandError, match="--days must be greater than 0"):
        call_command("backfill_fragmentation", days=-1, stdout=io.StringIO())
    out = io.StringIO()
    call_command("backfill_fragmentation", days=1, step_minutes=60, stdout=out)
    assert "Stored 25 replayed fragmentation samples" in out.getvalue()


def test_samples_older_than_the_retention_are_pruned(fleet):
    now = timezone.now()
    _sample(now - timedelta(days=20), fragmented=1.0)
    _sample(now - timedelta(days=2), fragmented=2.0)
    assert prune_raw(now)["fragmentationsample"] == 1  # the default period, 14 days
    assert list(FragmentationSample.objects.values_list("gpus_fragmented", flat=True)) == [2.0]


def _trend_queries(since, until) -> int:
    with CaptureQueriesContext(connection) as queries:
        fragmentation_trend(since, until, points=24)
    return len(queries)


def test_the_trend_issues_the_same_queries_for_ten_or_two_thousand_samples(fleet):
    now = timezone.now()
    FragmentationSample.objects.bulk_create(
        FragmentationSample(
            taken_at=now - timedelta(minutes=5 * i), gpus_free=64, gpus_fragmented=0, largest_gang=64, placeable={}
        )
        for i in range(10)
    )
    few = _trend_queries(now - timedelta(days=7), now)
    FragmentationSample.objects.bulk_create(
        FragmentationSample(
            taken_at=now - timedelta(minutes=5 * i), gpus_free=64, gpus_fragmented=0, largest_gang=64, placeable={}
        )
        for i in range(10, 2000)
    )
    assert _trend_queries(now - timedelta(days=7), now) == few <= 6


def test_the_fragmentation_page_draws_the_trend_from_stored_samples(client, fleet, cast):
    now = timezone.now()
    for hours in range(0, 25):
        _sample(now - timedelta(hours=hours), fragmented=3.5, free=44.0)
    client.force_login(cast["researcher"])
    body = client.get(reverse("fragmentation")).content.decode()
    assert "Latest: 44 free GPUs, 3.5 unusable." in body


def test_generated_history_carries_fragmentation_samples_for_the_span_with_placements(db):
    call_command(
        "generate_history",
        nodes=12,
        teams=4,
        days=3,
        sample_hours=2,
        sample_step=600,
        jobs_per_day=30,
        placements_days=1,
        seed=3,
        stdout=io.StringIO(),
    )
    samples = FragmentationSample.objects.order_by("taken_at")
    assert samples.count() == 24 * 60 // 10 + 1  # a day at the sample step (10 minutes), both ends included
    assert samples.first().replayed and samples.last().gpus_free == sum(
        n.gpu_total - n.gpu_allocated for n in Node.objects.all()
    )
