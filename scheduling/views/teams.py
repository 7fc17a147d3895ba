"""Teams: a sortable, filterable list and a detail page per team (404 for teams you may not see)."""

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils.functional import SimpleLazyObject

from scheduling import charts
from scheduling.filters import QuotaGrantFilter, TeamFilter, WorkloadFilter
from scheduling.models import QuotaGrant, QuotaRequest, Team, Workload
from scheduling.selectors import access, usage
from scheduling.selectors import enforcement as enforcement_reads
from scheduling.selectors import entitlement_split as split_reads
from scheduling.selectors import teams as teams_reads
from scheduling.services import forecast
from scheduling.tables import QuotaGrantTable, QuotaRequestTable, TeamTable, WorkloadTable

from .common import paginate, time_range
from .page_cache import served_while_unchanged


@login_required
@served_while_unchanged
def team_list(request: HttpRequest) -> HttpResponse:
    visible = access.only_visible(Team.objects.all(), request.user, "pk")
    team_filter = TeamFilter(request.GET, queryset=visible, request=request)
    chosen = set(team_filter.qs.values_list("slug", flat=True)) if team_filter.is_valid() else set()
    tree = Team.objects.tree()
    parents = {t.slug: tree.parent_slug(t.pk) or "" for t in tree.teams.values()}
    rows = [
        {**row.__dict__, "parent": parents.get(row.slug, "")} for row in teams_reads.teams_now() if row.slug in chosen
    ]
    table = TeamTable([_Row(r) for r in rows])
    paginate(request, table, 50)
    return render(request, "scheduling/team_list.html", {"table": table, "filter": team_filter, "count": len(rows)})


def _forecast_chart(team: Team) -> str:
    """The team's demand forecast: one team's rollups, a few milliseconds of fitting, so it is drawn on every view."""
    forecasts = forecast.demand_forecasts(teams={team.slug}, orchestrators=False)
    if not forecasts.teams:
        return ""
    return charts.forecast_chart(forecasts.teams[0], forecast.guarantees(forecasts.as_of).get(team.slug))


class _Row(dict):
    """A dict that tables2 sorts by key and templates read by attribute."""

    __getattr__ = dict.__getitem__


@login_required
@served_while_unchanged
def team_detail(request: HttpRequest, slug: str) -> HttpResponse:
    team = access.team_or_404(request.user, slug, Team.objects.select_related("parent"))
    window = time_range(request, default="7d")
    detail = usage.team_detail(team, window.since, window.until)
    queue = next((q for q in detail.queues if q.gpu_model == ""), None)
    pending = Workload.objects.filter(team_id__in=detail.subtree, state=Workload.State.PENDING).select_related(
        "orchestrator"
    )
    pending_filter = WorkloadFilter(request.GET, queryset=pending, request=request)
    pending_table = WorkloadTable(pending_filter.qs, prefix="w-")
    grants = QuotaGrantFilter(
        request.GET, queryset=QuotaGrant.objects.filter(team_id__in=detail.subtree).select_related("team"),
        request=request,
    )
    grant_table = QuotaGrantTable(grants.qs, prefix="g-")
    requests = QuotaRequest.objects.filter(team_id__in=detail.subtree).select_related(
        "team", "requester", "orchestrator"
    )
    request_table = QuotaRequestTable(requests, prefix="r-")
    for table in (pending_table, grant_table, request_table):
        paginate(request, table, 15)
    context = {
        "team": team,
        "detail": detail,
        "queue": queue,
        "window": window,
        "pending_table": pending_table,
        "pending_filter": pending_filter,
        "grant_table": grant_table,
        "request_table": request_table,
        "can_request": request.user.has_perm("scheduling.submit_quota_request", team),
        "area_chart": charts.team_area_chart(
            detail.series,
            queue.guaranteed if queue else 0,
            queue.burst_limit if queue else 0,
            f"{team.name}: GPUs allocated by {detail.series_by}",
        ),
        "share_chart": charts.share_chart(detail.shares) if detail.shares else "",
        "forecast_chart": _forecast_chart(team),
        "enforcement": enforcement_reads.team_enforcement(team),
        "reach": SimpleLazyObject(enforcement_reads.governance_reach),  # read only when no round reached a cluster
        "split": split_reads.team_split(team),
    }
    return render(request, "scheduling/team_detail.html", context)
