"""Finished jobs and their efficiency (Open XDMoD's job viewer): reads through ``selectors.finished_jobs``,
filtered by the workload FilterSet the API shares, one django-tables2 table with its CSV download."""

from datetime import timedelta

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone

from scheduling.filters import FinishedWorkloadFilter
from scheduling.selectors import access, finished_jobs
from scheduling.tables import FinishedWorkloadTable

from .common import paginate

PAGE_SIZE = 50
# Without "Ended from" the list starts a day back (the portal's default range; Open XDMoD always shows a
# range): the whole history is hundreds of thousands of jobs, and its totals a scan of them all on every page.
DEFAULT_WINDOW = timedelta(days=1)


@login_required
def finished_workloads(request: HttpRequest) -> HttpResponse:
    asked = request.GET.copy()
    if not asked.get("finished_after"):
        asked["finished_after"] = f"{timezone.now() - DEFAULT_WINDOW:%Y-%m-%dT%H:%M}"
    found = FinishedWorkloadFilter(asked, queryset=finished_jobs.finished_workloads(request.user), request=request)
    valid = found.is_valid()
    rows = found.qs if valid else found.queryset.none()
    table = FinishedWorkloadTable(rows)
    paginate(request, table, PAGE_SIZE)
    context = {
        "table": table, "filter": found, "totals": finished_jobs.totals(rows),
        "no_team": access.in_no_team(request.user), "sees_everything": access.sees_everything(request.user),
        "leads": bool(access.lead_team_ids(request.user)),
    }
    return render(request, "scheduling/finished_workloads.html", context, status=200 if valid else 400)
