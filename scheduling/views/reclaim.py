"""Reclaim plans (issue 31, item 3): in review mode a reclaim of borrowed GPUs is a plan an admin approves here.

Everyone signed in reads the plans touching the teams they may see (``selectors.reclaim.reclaim_page``: the rest
of a plan redacted; an outsider sees no other team's plan); only portal admins (``enforce_governance``) approve
or reject, always with a reason, through the services the API uses. An approved plan is applied by a task."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from scheduling.selectors import reclaim as reclaim_reads
from scheduling.services import reclaim
from scheduling.tables import ReclaimPlanTable
from scheduling.tasks import apply_reclaim_plan

from .common import paginate, posted_version

DECISIONS = {"approve": reclaim.approve_reclaim_plan, "reject": reclaim.reject_reclaim_plan}


def _can_decide(request: HttpRequest) -> bool:
    return request.user.has_perm("scheduling.enforce_governance")


@login_required
def reclaim_plans(request: HttpRequest) -> HttpResponse:
    page = reclaim_reads.reclaim_page(request.user)
    past = ReclaimPlanTable(list(page.past), orderable=False)
    paginate(request, past, 25)
    context = {
        "pending": page.pending,
        "past": past,
        "can_decide": _can_decide(request),
    }
    return render(request, "scheduling/reclaim.html", context)


@login_required
@require_POST
def reclaim_decide(request: HttpRequest, pk: int) -> HttpResponse:
    if not _can_decide(request):
        raise PermissionDenied("Only portal admins approve or reject reclaim plans.")
    if reclaim_reads.visible_plan(request.user, pk) is None:
        raise Http404("No reclaim plan matches the given query.")
    decision = request.POST.get("decision", "")
    act = DECISIONS.get(decision)
    if act is None:
        messages.error(request, "Choose approve or reject.")
        return redirect("reclaim")
    try:
        plan = act(pk, by=request.user, reason=request.POST.get("reason", ""), seen_version=posted_version(request))
    except (ValidationError, PermissionDenied) as error:
        text = " ".join(error.messages) if isinstance(error, ValidationError) else str(error)
        messages.error(request, f"Reclaim plan #{pk}: {text}")
        return redirect("reclaim")
    if decision == "approve":
        apply_reclaim_plan.delay(plan.pk)
        then = ("dry run: the commands it would send are recorded" if plan.dry_run
                else "its jobs are being stopped")
        messages.success(request, f"Reclaim plan #{pk} approved, {then} ({plan.reason}).")
    else:
        messages.success(request, f"Reclaim plan #{pk} rejected: nothing is stopped ({plan.reason}).")
    return redirect("reclaim")
