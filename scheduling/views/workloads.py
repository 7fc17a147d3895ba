"""My workloads: a researcher's running and pending work across the orchestrators, each wait explained;
a lead's "my team's" tab. Reads go through ``selectors.workloads`` (where the ownership rule lives)."""

from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone

from scheduling.limits import NUL, NUL_RULE
from scheduling.selectors import why_waits
from scheduling.selectors import workloads as workload_reads

from .common import BadQuery
from .page_cache import served_while_unchanged

SCOPES = ("mine", "team")
MAX_SEARCH = 200
# Each pending row shown is one backfill over its queue: only the rows of the page shown are explained.
PAGE_SIZE = 50


@login_required
@served_while_unchanged
def my_workloads(request: HttpRequest) -> HttpResponse:
    scope = request.GET.get("scope", "mine")
    if scope not in SCOPES:
        raise BadQuery("scope", "must be mine or team", scope)
    search = request.GET.get("q", "").strip()[:MAX_SEARCH]
    if NUL in search:
        raise BadQuery("q", NUL_RULE, search.replace(NUL, "\\0"))
    led = workload_reads.teams_led(request.user)
    if scope == "team" and not led:
        scope = "mine"  # only leads have a team tab: others see their own work
    active = workload_reads.active_workloads(request.user, scope=scope, search=search)
    shown = Paginator(active, PAGE_SIZE).get_page(request.GET.get("page"))
    rows = why_waits.with_advice(workload_reads.workload_rows(shown.object_list), timezone.now())
    context = {
        "rows": rows,
        "page": shown,
        "scope": scope,
        "search": search,
        "led": led,
        "pending": sum(1 for row in rows if row.workload.state == "pending"),
        "total": shown.paginator.count,
    }
    return render(request, "scheduling/my_workloads.html", context)
