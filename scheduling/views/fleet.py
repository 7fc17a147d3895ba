"""Fleet pages: fragmentation, utilisation and (for admins) the orchestrators' health."""

from datetime import timedelta

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse

from scheduling import charts
from scheduling.selectors import access, fleet, fragmentation_trend, usage
from scheduling.selectors import fragmentation as fragmentation_reads

from .common import time_range
from .page_cache import served_while_unchanged

TREND_RANGES = ("6h", "24h", "7d")
WAIT_MAX_SPAN = timedelta(days=31)


@login_required
@served_while_unchanged
def fragmentation(request: HttpRequest) -> HttpResponse:
    window = time_range(request, default="24h", allowed=TREND_RANGES)
    now = fragmentation_reads.fragmentation_now()
    trend = fragmentation_trend.fragmentation_trend(window.since, window.until, points=24)
    by_model: dict[str, list[int]] = {}
    for cell in now.nodes:
        free_total = by_model.setdefault(cell.gpu_model or "unknown", [0, 0])
        free_total[0] += cell.gpu_total - cell.gpu_allocated if cell.schedulable else 0
        free_total[1] += cell.gpu_total
    context = {
        "window": window,
        "frag": now,
        "by_model": sorted(by_model.items()),
        "domains": [d for d in now.domains if d.unusable > 0.05][:30],
        "mix": sorted(now.size_mix.items()),
        "largest_gang": max((size for size, count in now.placeable.items() if count), default=0),
        "heatmap": charts.occupancy_heatmap(now.nodes, links=[reverse("node-detail", args=[n.name])
                                                              for n in now.nodes]),
        "placeable_chart": charts.placeable_chart(now.placeable),
        "trend_chart": charts.fragmentation_trend_chart(trend),
    }
    return render(request, "scheduling/fragmentation.html", context)


@login_required
@served_while_unchanged
def utilisation(request: HttpRequest) -> HttpResponse:
    window = time_range(request, default="7d")
    visible = access.team_ids_visible_to(request.user)
    by_orchestrator = usage.gpu_hours_by_orchestrator(window.since, window.until)
    by_team = usage.gpu_hours_by_team(window.since, window.until, visible)
    # Percentiles need every job's wait; over a long window the latest month stands for it (a year of
    # jobs is hundreds of thousands of rows to read on each render).
    wait_since = max(window.since, window.until - WAIT_MAX_SPAN)
    waits = usage.queue_waits(wait_since, window.until)
    team_rows = [r for r in by_team if r.depth == 0] or by_team
    drill = f"?{window.query}"
    context = {
        "window": window,
        "by_orchestrator": by_orchestrator,
        "by_team": by_team,
        "busy_measured": any(r.busy_h is not None for r in [*by_orchestrator, *by_team]),
        "waits": waits,
        "wait_since": wait_since,
        "wait_clipped": wait_since > window.since,
        "orchestrator_chart": charts.gpu_hours_chart(by_orchestrator, "GPU-hours by orchestrator"),
        "drill_query": drill,
        # A team's bar opens its users in the same window (the drill-down), as its name in the table does.
        "team_chart": charts.gpu_hours_chart(
            team_rows, "GPU-hours by team", [reverse("usage-team", args=[r.key]) + drill for r in team_rows]
        ),
        "wait_chart": charts.wait_chart(waits),
    }
    return render(request, "scheduling/utilisation.html", context)


@login_required
def orchestrators(request: HttpRequest) -> HttpResponse:
    if not request.user.has_perm("scheduling.edit_orchestrators"):
        raise PermissionDenied("Orchestrators are managed by portal admins.")
    window = time_range(request, default="24h", allowed=("6h", "24h", "7d"))
    rows = fleet.orchestrator_health(window.since)
    return render(request, "scheduling/orchestrators.html", {"rows": rows, "window": window})
