"""The report's figures against the hand-computed week in conftest.py (GPU-hours exact to the minute)."""

import pytest

from scheduling.reports.capacity import stale_stretches, week_before
from scheduling.services.report_delivery import report_content

from .conftest import MONDAY, WEEK, at

pytestmark = pytest.mark.django_db

W1 = 16 * (6 * 60 + 31) / 60  # 2 x 8 GPUs, Mon 10:00-16:31
W2 = 8 * (24 * 60 + 2 * 60 + 15) / 60  # 8 GPUs from the week's start to Tue 02:15
W3 = 4 * 60  # 4 GPUs from Fri 12:00 to the week's end, still running
W5 = 4 * 2.25  # 4 GPUs Wed 09:45-12:00


@pytest.fixture
def report(week):
    return report_content(WEEK)


def _team(report, slug):
    return next(t for t in report["sections"]["teams"]["teams"] if t["slug"] == slug)


def test_the_week_runs_monday_to_monday_in_the_time_zone(settings):
    settings.TIME_ZONE = "Europe/Berlin"
    window = week_before(at(7, 7))  # Monday 2026-11-23 07:00 UTC
    assert window.start.isoformat() == "2026-11-16T00:00:00+01:00"
    assert window.end.isoformat() == "2026-11-23T00:00:00+01:00"


def test_pool_capacity_splits_into_allocated_idle_down_and_planned_gpu_hours(report):
    pool = report["sections"]["capacity"]["pools"][0]
    capacity = 64 * 168 - 8 * 2
    assert pool["name"] == "slurm-a"
    assert pool["capacity_h"] == pytest.approx(capacity)
    assert pool["allocated_h"] == pytest.approx(20 * 168)
    assert pool["unavailable_h"] == pytest.approx(8 * 24)
    assert pool["planned_h"] == pytest.approx(8 * 6)
    assert pool["idle_h"] == pytest.approx(capacity - 20 * 168 - 8 * 24 - 8 * 6)
    assert pool["pending_h"] == pytest.approx(16 * 10)
    assert pool["coverage_pct"] == pytest.approx(100)


def test_team_use_is_counted_to_the_minute_from_job_records_with_sub_teams_in_their_parent(report):
    assert _team(report, "nlp")["used_h"] == pytest.approx(W1 + W5, abs=1e-5)
    assert _team(report, "research")["used_h"] == pytest.approx(W1 + W5 + W2, abs=1e-5)
    assert _team(report, "production")["used_h"] == pytest.approx(W3, abs=1e-5)
    assert report["sections"]["teams"]["total_used_h"] == pytest.approx(W1 + W2 + W3 + W5, abs=1e-5)


def test_guarantees_and_target_shares_follow_the_policy_in_force_each_day(report):
    research, production = _team(report, "research"), _team(report, "production")
    assert research["guaranteed_h"] == pytest.approx(16 * 72 + 32 * 96)
    assert production["guaranteed_h"] == pytest.approx(24 * 168)
    assert research["target_pct"] == pytest.approx((40 * 72 + 50 * 96) / 168, abs=1e-3)
    assert production["target_pct"] == pytest.approx((60 * 72 + 50 * 96) / 168, abs=1e-3)
    assert research["policy_changes"] == 1


def test_actual_share_is_the_team_part_of_its_siblings_gpu_hours(report):
    total = W1 + W2 + W3 + W5
    assert _team(report, "research")["actual_pct"] == pytest.approx(100 * (W1 + W2 + W5) / total, abs=1e-3)
    assert _team(report, "production")["actual_pct"] == pytest.approx(100 * W3 / total, abs=1e-3)


def test_burst_counts_only_gpu_hours_held_above_the_guarantee_of_that_moment(report):
    burst_minutes = 6 * 60 + 31  # Mon 10:00-16:31, when W1 and W2 ran together
    assert _team(report, "research")["burst_h"] == pytest.approx((24 - 16) * burst_minutes / 60, abs=1e-5)
    assert _team(report, "nlp")["burst_h"] == pytest.approx((16 - 8) * burst_minutes / 60, abs=1e-5)
    assert _team(report, "production")["burst_h"] == 0


def test_busy_vs_allocated_shows_where_dcgm_measured_and_counts_in_the_parent(report):
    nlp, research, production = (_team(report, slug) for slug in ("nlp", "research", "production"))
    assert (nlp["measured_allocated_h"], nlp["busy_h"], nlp["busy_pct"]) == (240, 96, 40)
    assert (research["measured_allocated_h"], research["busy_h"]) == (240, 96)
    assert production["busy_pct"] is None  # never measured: not read as idle
    assert report["sections"]["capacity"]["pools"][0]["busy_h"] is None
    idle = [a["text"] for a in report["sections"]["trend"]["actions"] if a["rule"] == "idle-allocation"]
    assert any(text.startswith("NLP's GPUs were busy only 40 %") for text in idle)


def test_top_users_rank_by_gpu_hours_within_the_subtree(report):
    users = [(u["user"], u["gpu_h"]) for u in _team(report, "research")["top_users"]]
    assert users == [("leo", pytest.approx(W2, abs=1e-5)), ("rita", pytest.approx(W1 + W5, abs=1e-5))]


def test_a_failed_scrape_leaves_the_source_stale_until_the_next_success(report):
    sources = {s["name"]: s for s in report["sections"]["completeness"]["sources"]}
    assert sources["slurm-a"]["stale_h"] == pytest.approx(1.0)
    assert sources["slurm-a"]["failures"] == 1
    assert sources["k8s-a"]["stale_h"] == pytest.approx(168.0)  # never scraped


def test_a_source_that_stops_answering_goes_stale_after_the_freshness_limit():
    stretches = stale_stretches(MONDAY, at(0, 2), MONDAY, [(at(0, 1), True)], limit_s=600)
    assert [(a.isoformat(), b.isoformat()) for a, b in stretches] == [
        (at(0, 0, 10).isoformat(), at(0, 1).isoformat()),
        (at(0, 1, 10).isoformat(), at(0, 2).isoformat()),
    ]


def test_queue_waits_are_nearest_rank_percentiles_per_size_and_orchestrator(report):
    rows = {(w["orchestrator"], w["size"]): w for w in report["sections"]["waits"]["by_orchestrator"]}
    four = rows[("slurm-a", "4 GPU")]
    assert (four["jobs"], four["p50_s"], four["p90_s"], four["p99_s"]) == (2, 2700, 3600, 3600)
    assert rows[("slurm-a", "16 GPU")]["jobs"] == 1  # w2 started before the week


def test_pending_reasons_group_by_their_wording_with_numbers_folded(report):
    reasons = report["sections"]["waits"]["pending_reasons"]
    assert reasons == [
        {
            "reason": "no N free GPUs inside one leaf switch (largest free block N)",
            "workloads": 2,
            "gpus": 24,
            "orchestrators": ["slurm-a"],
        }
    ]


def test_fragmentation_replays_placements_over_the_week(report):
    frag = report["sections"]["fragmentation"]
    points = {p["at"]: p for p in frag["points"]}
    assert points[at(0, 0).isoformat()]["free"] == 64 and points[at(0, 0).isoformat()]["largest_gang"] == 64
    assert points[at(0, 12).isoformat()]["free"] == 48 and points[at(0, 12).isoformat()]["largest_gang"] == 32
    assert (frag["largest_gang_min"], frag["largest_gang_max"]) == (32, 64)


def test_rebalancing_counts_moves_and_each_floor_hour_held_or_breached(report):
    reb = report["sections"]["rebalancing"]
    assert (reb["moves"], reb["gpus_moved"]) == (1, 8)
    assert reb["by_direction"] == [{"source": "slurm-a", "target": "k8s-a", "nodes": 1, "gpus": 8}]
    floor = reb["floors"][0]
    assert (floor["orchestrator"], floor["hours_with_floor"]) == ("slurm-a", 5 * 12)
    assert (floor["hours_breached"], floor["hours_held"], floor["worst_shortfall_gpus"]) == (2, 58, 8)


def test_quota_requests_filed_decided_and_expiring_next_week(report):
    quota = report["sections"]["quota"]
    assert (quota["filed"], quota["approved"], quota["denied"]) == (3, 1, 1)
    assert (quota["approved_gpus"], quota["denied_gpus"]) == (8, 16)
    assert [(g["team"], g["gpus"]) for g in quota["expiring_next_week"]] == [("nlp", 8)]


def test_suggested_actions_name_the_breached_floor_and_the_stale_source(report):
    rules = {a["rule"] for a in report["sections"]["trend"]["actions"]}
    assert {"floor-breached", "stale-source", "grants-expiring"} <= rules
    assert report["sections"]["trend"]["previous_source"] == "recomputed"


def test_week_over_week_reads_the_stored_report_of_the_week_before(week):
    from scheduling.services import report_delivery

    report_delivery.generate_report(WEEK)
    following = WEEK.previous().__class__(WEEK.end, WEEK.end + (WEEK.end - WEEK.start), "UTC")
    trend = report_content(following)["sections"]["trend"]
    capacity = next(r for r in trend["rows"] if r["key"] == "capacity_h")
    assert trend["previous_source"] == "stored report"
    assert capacity["previous"] == pytest.approx(64 * 168 - 16)
    assert capacity["current"] == 0
