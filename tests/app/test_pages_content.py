"""What each page shows: real numbers, honest gaps ("no busy data"), the engine's explanations."""

import re
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from scheduling.models import CollectorRun, NodeMove, Orchestrator, RebalancePlan, UsageRollup, UsageSample

from .test_pages_support import build_site

pytestmark = pytest.mark.django_db


@pytest.fixture
def site(orchestrator, fleet, teams, queues, cast):
    return build_site(orchestrator, fleet, teams)


def _body(client, user, url, **params) -> str:
    client.force_login(user)
    response = client.get(url, params)
    assert response.status_code == 200
    return response.content.decode()


def test_the_overview_shows_busy_gpus_and_the_largest_placeable_gang(client, site, cast):
    body = _body(client, cast["researcher"], reverse("overview"))
    assert re.search(r'id="kpi-gpus-busy">9<', body)
    # 64 GPUs, 11 allocated on two nodes: six empty 8-GPU nodes, so a 32-GPU gang fits and 64 does not.
    assert re.search(r'id="kpi-largest-gang">32 GPUs<', body)
    assert "Pending GPUs by orchestrator" in body and "GPUs allocated per orchestrator" in body


def test_the_overviews_pending_demand_links_to_why_ones_own_work_waits(client, site, cast):
    body = _body(client, cast["researcher"], reverse("overview"))
    assert re.search(rf'<a id="kpi-why-waiting" href="{reverse("my-workloads")}">why yours wait</a>', body)


def test_the_overview_says_no_busy_data_when_no_source_reports_it(client, site, cast):
    UsageSample.objects.update(gpus_busy=None)
    body = _body(client, cast["researcher"], reverse("overview"))
    assert "no busy data" in body


def test_the_overview_shows_the_latest_rebalance_with_its_moves(client, site, cast, fleet, orchestrator):
    ray = Orchestrator.objects.create(name="ray-a", kind="ray", endpoint="http://ray:8265")
    plan = RebalancePlan.objects.create(reason="overnight Ray demand")
    NodeMove.objects.create(plan=plan, node=fleet[7], source=orchestrator, target=ray, reason="empty node")
    body = _body(client, cast["researcher"], reverse("overview"))
    assert "overnight Ray demand" in body and "dgx07" in body and "1 node move" in body


def test_a_permalink_pins_the_window_to_its_end(client, site, cast):
    end = (timezone.now() - timedelta(days=1)).replace(microsecond=0)
    body = _body(client, cast["researcher"], reverse("overview"), range="24h", end=end.isoformat())
    assert "pinned to" in body and "back to live" in body


def test_long_windows_read_rollups_not_raw_samples(client, site, cast, django_assert_max_num_queries):
    UsageSample.objects.all().delete()  # rollups alone must draw a 30-day chart
    body = _body(client, cast["admin"], reverse("overview"), range="30d")
    assert "No samples in this window yet" not in body


def test_the_team_page_explains_why_work_is_pending(client, site, cast):
    body = _body(client, cast["researcher"], reverse("team-detail", args=["nlp"]))
    assert "no 64 free GPUs inside one leaf switch (largest free block 32)" in body
    assert "GPUs allocated by user" in body and "guaranteed 8" in body and '"name":"rita"' in body


def test_a_parent_team_page_shows_sub_teams_target_and_actual_share(client, site, cast):
    body = _body(client, cast["lead"], reverse("team-detail", args=["research"]))
    assert "Target share vs actual share" in body
    assert re.search(r"NLP</a></th><td>100 %</td><td>100 % \(8 GPUs\)", body)


def test_fragmentation_counts_requests_that_could_start_now(client, site, cast):
    body = _body(client, cast["researcher"], reverse("fragmentation"))
    # free: 5 on dgx01 and 8 on each of six empty nodes = 53
    assert re.search(r'id="kpi-free">53<', body)
    counts = re.search(r"could start now \(each size counted alone\).*?<tbody><tr>(.*?)</tr>", body, re.S).group(1)
    assert re.findall(r"<td>(\d+)</td>", counts) == ["53", "26", "13", "6", "3", "1", "0"]
    assert "GPU occupancy by node" in body and '"type":"heatmap"' in body


def test_utilisation_reports_gpu_hours_and_queue_wait_percentiles(client, site, cast):
    body = _body(client, cast["admin"], reverse("utilisation"), range="7d")
    assert "GPU-hours by orchestrator" in body and "Queue wait by request size" in body
    waits = re.search(r'<table class="grid compact" id="waits"[^>]*>.*?</table>', body, re.S).group(0)
    assert "8 GPU" in waits  # run-1: 8 GPUs, waited one hour
    assert "<td>1 h</td>" in waits  # 3600 s, as people read it


def test_utilisation_says_no_busy_data_honestly(client, site, cast):
    UsageRollup.objects.update(gpu_s_busy=None)
    body = _body(client, cast["admin"], reverse("utilisation"))
    assert 'id="no-busy"' in body and "no busy data" in body


def test_the_orchestrators_page_shows_freshness_scrape_duration_and_last_error(client, site, cast, orchestrator):
    orchestrator.last_error, orchestrator.last_error_at = "401 Unauthorized from slurmrestd", timezone.now()
    orchestrator.save()
    CollectorRun.objects.create(orchestrator=orchestrator, started_at=timezone.now(), duration_ms=1500, error="401")
    body = _body(client, cast["admin"], reverse("orchestrators"))
    assert "401 Unauthorized from slurmrestd" in body and "stale" in body
    assert "1500 ms" in body and "slowest 1500 ms" in body


def test_charts_embed_plotly_figures_with_text_alternatives(client, site, cast):
    body = _body(client, cast["researcher"], reverse("overview"))
    assert body.count('class="plot" data-figure="') >= 3  # drawn by static/js/charts.js
    assert 'role="img" aria-label="GPUs allocated per orchestrator.' in body


def test_wait_percentiles_over_a_year_cover_its_last_month_and_say_so(client, site, cast):
    body = _body(client, cast["admin"], reverse("utilisation"), range="365d")
    assert "in the last 31 days of the window" in body and "<td>1 h</td>" in body
