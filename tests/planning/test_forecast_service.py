"""The forecast service on recorded hourly rollups: subtree demand, missing hours, the guarantee outlook."""

import math
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from scheduling.models import QuotaGrant, QuotaRequest, UsageRollup
from scheduling.selectors.planning import floor_hour, hourly_demand
from scheduling.services import forecast
from scheduling.services.table_changes import tables_read
from tests.support import require_postgres

pytestmark = pytest.mark.django_db


def _record(orchestrator, teams, hours, *, nlp_at, production_at=lambda h: 10.0, gap=()):
    """Hourly rollups: pool rows (team NULL) and per-team rows, ``covered_s`` = 1800 (half-hour rounds)."""
    rows = []
    for h in range(hours):
        if h in gap:
            continue
        at = START + timedelta(hours=h)
        nlp, production = nlp_at(h), production_at(h)
        for team, gpus in ((None, nlp + production), (teams["nlp"], nlp), (teams["production"], production)):
            rows.append(
                UsageRollup(
                    resolution="hour",
                    period_start=at,
                    orchestrator=orchestrator,
                    team=team,
                    gpu_s_total=64 * 1800,
                    gpu_s_allocated=0.75 * gpus * 1800,
                    gpu_s_pending=0.25 * gpus * 1800,
                    covered_s=1800,
                )
            )
    UsageRollup.objects.bulk_create(rows)


NOW = floor_hour(timezone.now())
START = NOW - timedelta(weeks=3)


def daily(h):
    return 4 + 2 * math.sin(2 * math.pi * h / 24)


def test_hourly_demand_sums_a_team_with_its_subtree_and_marks_hours_without_rounds(orchestrator, teams, queues):
    _record(orchestrator, teams, 3 * 168, nlp_at=daily, gap=(5, 6))
    history = hourly_demand(START, NOW)
    assert len(history.hours) == 3 * 168
    assert history.by_team["nlp"][0] == pytest.approx(daily(0))
    assert history.by_team["research"][1] == pytest.approx(daily(1))  # nlp's parent carries its demand
    assert history.by_team["research"][5] is None and history.by_orchestrator["slurm-a"][5] is None
    assert history.by_team["production"][7] == pytest.approx(10.0)
    assert history.by_orchestrator["slurm-a"][7] == pytest.approx(daily(7) + 10.0)
    only = hourly_demand(START, NOW, team_ids={teams["research"].pk})
    assert set(only.by_team) == {"research"}


def test_a_growing_team_gets_the_date_it_exhausts_its_guarantee(orchestrator, teams, queues):
    # nlp: guarantee 8; mean demand 1 GPU rising 0.25 GPU/day: 6.25 after 21 days, 8 about 7 days later.
    _record(orchestrator, teams, 3 * 168, nlp_at=lambda h: 1 + 0.25 * h / 24 + daily(h) - 4)
    rows = {row.team: row for row in forecast.guarantee_exhaustion(NOW)}
    nlp = rows["nlp"]
    assert nlp.trend_per_day == pytest.approx(0.25, abs=0.02)
    expected = (8 - nlp.level_now) / nlp.trend_per_day
    assert nlp.on == (NOW.date() + timedelta(days=int(expected)))
    assert 6.5 < expected < 7.5 and f"exhausts its guarantee of 8 GPUs on {nlp.on:%Y-%m-%d}" in nlp.sentence
    production = rows["production"]  # flat at 10 GPUs, guarantee 24
    assert production.on is None and "does not exhaust" in production.sentence


def test_a_team_above_its_guarantee_is_said_to_rely_on_burst_and_a_grant_raises_the_bar(
    orchestrator, teams, queues, cast
):
    _record(orchestrator, teams, 3 * 168, nlp_at=lambda h: 12.0)
    nlp = next(r for r in forecast.guarantee_exhaustion(NOW) if r.team == "nlp")
    assert nlp.on == NOW.date() and "relies on burst" in nlp.sentence
    request = QuotaRequest.objects.create(
        requester=cast["researcher"],
        team=teams["nlp"],
        gpus=8,
        starts_at=NOW - timedelta(days=1),
        ends_at=NOW + timedelta(days=5),
        justification="x",
        state=QuotaRequest.State.ACTIVE,
    )
    QuotaGrant.objects.create(
        request=request,
        team=teams["nlp"],
        gpus=8,
        starts_at=request.starts_at,
        ends_at=request.ends_at,
        state=QuotaGrant.State.ACTIVE,
    )
    nlp = next(r for r in forecast.guarantee_exhaustion(NOW) if r.team == "nlp")
    assert nlp.guaranteed == 16 and nlp.on is None


def test_no_history_gives_a_sentence_not_a_crash(orchestrator, teams, queues):
    rows = forecast.guarantee_exhaustion(NOW)
    assert {r.team for r in rows} == {"nlp", "production", "research"}
    assert all(r.on is None and "not enough history" in r.sentence for r in rows)


def test_the_team_page_draws_the_teams_forecast(client, cast, orchestrator, teams, queues):
    _record(orchestrator, teams, 3 * 168, nlp_at=daily)
    client.force_login(cast["researcher"])
    page = client.get("/teams/nlp/")
    assert page.status_code == 200
    assert b'id="team-forecast-chart"' in page.content and b"NLP: demand and forecast" in page.content
    assert b"guaranteed 8" in page.content


def test_a_forecast_is_reused_until_a_closed_hour_of_its_window_changes(orchestrator, teams, queues):
    _record(orchestrator, teams, 3 * 168, nlp_at=daily)
    first = forecast.demand_forecasts(NOW)
    with CaptureQueriesContext(connection) as reused:
        again = forecast.demand_forecasts(NOW + timedelta(minutes=20))
    assert again.teams[0].forecast.mean == first.teams[0].forecast.mean
    assert not any("GROUP BY" in q["sql"] for q in reused.captured_queries)  # the history was not read again
    row = UsageRollup.objects.filter(team=teams["nlp"]).order_by("-period_start").first()
    row.gpu_s_allocated += 40 * 1800  # a late sample rewrites the last closed hour: +40 GPUs of demand
    row.save()
    changed = forecast.demand_forecasts(NOW)
    nlp = lambda result: next(s for s in result.teams if s.key == "nlp")  # noqa: E731
    assert nlp(changed).history[-1] == pytest.approx(nlp(first).history[-1] + 40)


@pytest.mark.usefixtures("transactional_db")
def test_on_postgresql_the_key_is_the_tables_generations_and_a_committed_write_is_a_new_key(
    orchestrator, teams, queues
):
    require_postgres()
    _record(orchestrator, teams, 3 * 168, nlp_at=daily)
    first = forecast.demand_forecasts(NOW)
    with CaptureQueriesContext(connection) as reused:
        forecast.demand_forecasts(NOW)
    assert not any('FROM "scheduling_usagerollup"' in q["sql"] for q in reused.captured_queries)  # none summed
    row = UsageRollup.objects.filter(team=teams["nlp"]).order_by("-period_start").first()
    row.gpu_s_allocated += 40 * 1800
    row.save()
    nlp = lambda result: next(s for s in result.teams if s.key == "nlp")  # noqa: E731
    assert nlp(forecast.demand_forecasts(NOW)).history[-1] == pytest.approx(nlp(first).history[-1] + 40)
    teams["nlp"].parent = None  # a moved team: research no longer sums nlp's demand
    teams["nlp"].save()
    research = lambda result: next(s for s in result.teams if s.key == "research")  # noqa: E731
    assert max(v or 0 for v in research(forecast.demand_forecasts(NOW)).history) == 0


def test_the_forecast_page_charts_the_top_of_the_tree_or_the_team_picked_in_the_table(
    client, cast, orchestrator, teams, queues
):
    _record(orchestrator, teams, 3 * 168, nlp_at=daily)
    client.force_login(cast["admin"])
    default = client.get("/forecast/").content.decode()
    assert "Research: demand and forecast" in default and "Production: demand and forecast" in default
    assert "NLP: demand and forecast" not in default and 'href="?team=nlp#team-charts"' in default
    picked = client.get("/forecast/?team=nlp").content.decode()
    assert "NLP: demand and forecast" in picked and "Research: demand and forecast" not in picked


def test_a_stored_forecast_counts_its_tables_for_a_page_around_it_and_they_are_all_it_reads(
    orchestrator, teams, queues
):
    _record(orchestrator, teams, 3 * 168, nlp_at=daily)
    computed: set[str] = set()
    with tables_read(computed):
        forecast.demand_forecasts(NOW)
    stored: set[str] = set()
    with tables_read(stored):  # reused: the key's fingerprint may read, the history is not read again
        forecast.demand_forecasts(NOW)
    assert computed and computed <= set(forecast.READ_TABLES) <= stored
