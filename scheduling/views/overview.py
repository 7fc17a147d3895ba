"""The fleet overview: what a Run:ai or Grafana DCGM user looks at first."""

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from scheduling import charts
from scheduling.selectors import access, busy, fleet, ledger, rebalance, usage
from scheduling.selectors import teams as teams_reads
from scheduling.selectors.first_step import first_step
from scheduling.services.table_changes import cached_while_unchanged

from .common import time_range
from .page_cache import served_while_unchanged


@login_required
@served_while_unchanged
def overview(request: HttpRequest) -> HttpResponse:
    window = time_range(request, default="24h")
    pools = fleet.pools_now()
    teams = [] if access.in_no_team(request.user) else teams_reads.teams_now()  # no team: no team's figures
    series = usage.orchestrator_series(window.since, window.until)
    # Placement over every node (a thousand engine nodes): the same answer until a node or pool changes.
    gangs = cached_while_unchanged("largest-gangs", fleet.LARGEST_GANGS_TABLES, fleet.largest_gangs_now)
    plan, moves = rebalance.latest_plan_summary()
    total = sum(p.gpus_total for p in pools)
    shown = [t for t in teams if t.depth == 0] + [t for t in teams if t.depth > 0]
    context = {
        "window": window,
        "pools": pools,
        "teams": teams,
        "fleet": {
            "gpus_total": total,
            "gpus_allocated": sum(p.gpus_allocated for p in pools),
            "gpus_busy": busy.busy_now(),
            "gpus_pending": sum(p.gpus_pending for p in pools),
            "nodes": sum(p.nodes for p in pools),
        },
        "stale": [p for p in pools if p.stale],
        "first_step": first_step(request.user),
        "ledger_alerts": ledger.high_severity_open(),
        "gangs": gangs,
        "largest_gang": max((size for size, count in gangs.items() if count), default=0),
        "plan": plan,
        "moves": moves,
        "pool_chart": charts.pool_split_chart(series),
        "pending_chart": charts.pending_chart(series),
        "team_chart": charts.team_standing_chart(
            [(t.name, t.allocated, t.guaranteed, t.burst_limit) for t in shown[:40]]
        ),
    }
    return render(request, "scheduling/overview.html", context)
