"""Thin views: read through selectors, render templates."""

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from scheduling import charts, selectors


@login_required
def overview(request: HttpRequest) -> HttpResponse:
    pools = selectors.pools_now()
    teams = selectors.teams_now()
    top_teams = [t for t in teams if t.depth == 0]
    context = {
        "pools": pools,
        "teams": teams,
        "fleet": {
            "gpus_total": sum(p.gpus_total for p in pools),
            "gpus_allocated": sum(p.gpus_allocated for p in pools),
            "gpus_pending": sum(p.gpus_pending for p in pools),
            "nodes": sum(p.nodes for p in pools),
        },
        "stale": [p for p in pools if p.stale],
        "gangs": selectors.largest_gangs_now(),
        "plan": selectors.latest_plan(),
        "pool_chart": charts.pool_split_chart(selectors.pool_series(hours=24)),
        "team_chart": charts.team_standing_chart(
            [(t.name, t.allocated, t.guaranteed, t.burst_limit) for t in top_teams]
            + [(t.name, t.allocated, t.guaranteed, t.burst_limit) for t in teams if t.depth > 0]
        ),
    }
    return render(request, "scheduling/overview.html", context)
