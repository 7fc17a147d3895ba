"""Capacity planning pages: the demand forecast and what-if scenarios.

Who: the forecast shows each user the teams they may see (admins all) and the orchestrator pools to team
members and admins. What-ifs are run by admins and team leads (``scheduling.run_whatif``); a result is
read by admins, its author, and members of the branch of the team it was run for
(``access.whatifs_readable_by``);
others get 404, as for a team they may not see. Signed-in users in no team get 403.
"""

from dataclasses import replace
from datetime import datetime

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone

from scheduling import charts
from scheduling.forms import WhatIfForm
from scheduling.models import WhatIfScenario
from scheduling.selectors import access
from scheduling.services import forecast, whatif
from scheduling.services.dispatch import EnqueueFailed
from scheduling.tasks import run_whatif

from .common import require_fleet_plans
from .page_cache import served_while_unchanged

CHART_HISTORY_HOURS = 14 * 24  # the fit reads every recorded week; the chart shows the recent ones


def _recent(series: forecast.SeriesForecast) -> forecast.SeriesForecast:
    keep = -CHART_HISTORY_HOURS
    return replace(series, history_hours=series.history_hours[keep:], history=series.history[keep:])


@login_required
@served_while_unchanged
def forecast_page(request: HttpRequest) -> HttpResponse:
    require_fleet_plans(request, "Capacity planning")
    shown = access.teams_visible_to(request.user)
    visible = {t.pk for t in shown}
    result = forecast.demand_forecasts(teams={t.slug for t in shown})
    guaranteed = forecast.guarantees(result.as_of)
    # The table covers every visible team; charts (heavy: ~80 kB each) the chosen team or the top of the tree.
    chosen = request.GET.get("team", "")
    charted = {chosen} if chosen else {t.slug for t in shown if t.parent_id not in visible}
    context = {
        "outlook": forecast.outlook(result, guaranteed),
        "team_charts": [
            charts.forecast_chart(_recent(s), guaranteed.get(s.key)) for s in result.teams if s.key in charted
        ],
        "orchestrator_charts": [charts.forecast_chart(_recent(s), None) for s in result.orchestrators],
        "chosen": chosen,
        "weeks": forecast.HISTORY_WEEKS,
        "shown_days": CHART_HISTORY_HOURS // 24,
        "horizon_days": forecast.HORIZON_HOURS // 24,
    }
    return render(request, "scheduling/forecast.html", context)


def _enqueue(pk: int) -> None:
    run_whatif.delay(pk)


@login_required
def whatif_list(request: HttpRequest) -> HttpResponse:
    require_fleet_plans(request, "Capacity planning")
    can_run = whatif.can_run(request.user)
    form = WhatIfForm(request.POST or None, user=request.user) if can_run else None
    if request.method == "POST":
        if not can_run:
            raise PermissionDenied("Only portal admins and team leads run what-if scenarios.")
        if form.is_valid():
            try:
                scenario = whatif.submit(
                    name=form.cleaned_data["name"],
                    raw_inputs=form.raw_inputs(),
                    by=request.user,
                    team=form.cleaned_data.get("team"),
                    enqueue=_enqueue,
                )
            except ValidationError as error:
                form.add_service_errors(error)
            except EnqueueFailed as error:  # stored, then failed with the reason: say so, and that it is not a 400
                return _whatif_page(request, form, can_run, status=503, unavailable=f"Not started: the run {error}")
            else:
                return redirect("whatif-detail", pk=scenario.pk)
    return _whatif_page(request, form, can_run, status=400 if form is not None and form.errors else 200)


def _whatif_page(request: HttpRequest, form, can_run: bool, *, status: int, unavailable: str = "") -> HttpResponse:
    scenarios = list(access.whatifs_readable_by(request.user)[:50])
    context = {"form": form, "scenarios": scenarios, "can_run": can_run, "unavailable": unavailable}
    return render(request, "scheduling/whatif.html", context, status=status)


def _readable_or_404(request: HttpRequest, pk: int) -> WhatIfScenario:
    return get_object_or_404(access.whatifs_readable_by(request.user), pk=pk)


def _history_span(results: dict) -> tuple[datetime | None, datetime | None]:
    """When the replayed history starts and ends (stored as ISO text; None where a result lacks it)."""
    history = results.get("history") or {}
    return _moment(history.get("since")), _moment(history.get("until"))


def _moment(text: str | None) -> datetime | None:
    try:
        return datetime.fromisoformat(text) if text else None
    except ValueError:
        return None


@login_required
def whatif_detail(request: HttpRequest, pk: int) -> HttpResponse:
    scenario = _readable_or_404(request, pk)
    context = {"scenario": scenario, "rows": [], "charts": [], "liveness": whatif.liveness(scenario, timezone.now()),
               "changes": whatif.describe_inputs(scenario.inputs or {})}
    if scenario.status == WhatIfScenario.Status.DONE:
        results = scenario.results
        context["rows"] = whatif.comparison(results)
        context["team_rows"] = whatif.team_comparison(results)
        context["floor_rows"] = whatif.floor_comparison(results)
        context["history_span"] = _history_span(results)
        context["charts"] = [
            charts.whatif_allocation_chart(results["baseline"], results["scenario"], context["history_span"][0]),
            charts.whatif_wait_chart(context["team_rows"]),
        ]
    return render(request, "scheduling/whatif_detail.html", context)


@login_required
def whatif_status(request: HttpRequest, pk: int) -> JsonResponse:
    scenario = _readable_or_404(request, pk)
    alive = whatif.liveness(scenario, timezone.now())
    return JsonResponse(
        {
            "status": scenario.status,
            "progress": scenario.progress,
            "error": scenario.error,
            "last_progress_at": alive.last_progress_at,
            "stalled": alive.stalled,
            "note": alive.note,
        }
    )
