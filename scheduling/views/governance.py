"""Governance enforcement, admins only: recent rounds per orchestrator, plans waiting in review mode
(approve or reject, with a reason) and drift findings (revert or adopt, with a reason). Reads through
selectors/enforcement.py, decisions through services/enforcement/decisions.py; every decision is in the rows'
history."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render

from scheduling.models import DriftFinding, EnforcementPlan, Orchestrator
from scheduling.selectors import enforcement as enforcement_reads
from scheduling.selectors import reclaim as reclaim_reads
from scheduling.services import orchestrators
from scheduling.services.enforcement import decisions as enforcement_decisions
from scheduling.services.enforcement import intent as enforcement_intent

from .common import posted_version

DECISIONS = {
    "approve": (EnforcementPlan, enforcement_decisions.approve_plan),
    "reject": (EnforcementPlan, enforcement_decisions.reject_plan),
    "revert": (DriftFinding, enforcement_decisions.revert_drift),
    "adopt": (DriftFinding, enforcement_decisions.adopt_drift),
}


@login_required
def governance(request: HttpRequest) -> HttpResponse:
    if not request.user.has_perm("scheduling.enforce_governance"):
        raise PermissionDenied("Only portal admins see and decide governance enforcement.")
    if request.method == "POST":
        return _set_mode(request) if request.POST.get("decision") == "mode" else _decide(request)
    modes = [(o, enforcement_intent.mode_of(o)) for o in enforcement_intent.governed_orchestrators()]
    context = {"page": enforcement_reads.governance_page(), "modes": modes,
               "reclaim_pending": reclaim_reads.pending_plan_count()}
    return render(request, "scheduling/governance.html", context)


def _set_mode(request: HttpRequest) -> HttpResponse:
    pk = request.POST.get("pk", "")
    target = get_object_or_404(Orchestrator, pk=int(pk) if pk.isascii() and pk.isdigit() else 0)
    try:
        orchestrators.set_governance_mode(
            target.pk, request.POST.get("mode", ""), by=request.user, reason=request.POST.get("reason", "")
        )
    except ValidationError as error:
        messages.error(request, f"{target.name}: " + " ".join(error.messages))
        return redirect("governance")
    mode = request.POST["mode"]
    then = "applies each round's changes" if mode == "auto" else "waits for your approval of each round's plan"
    messages.success(request, f"{target.name} is in {mode} mode: governance {then}.")
    return redirect("governance")


def _decide(request: HttpRequest) -> HttpResponse:
    decision = request.POST.get("decision", "")
    if decision not in DECISIONS:
        messages.error(request, "Choose approve, reject, revert or adopt.")
        return redirect("governance")
    model, act = DECISIONS[decision]
    pk = request.POST.get("pk", "")
    target = get_object_or_404(model, pk=int(pk) if pk.isascii() and pk.isdigit() else 0)
    seen = {"seen_version": posted_version(request)} if model is EnforcementPlan else {}
    try:
        act(target, by=request.user, reason=request.POST.get("reason", ""), **seen)
    except ValidationError as error:
        messages.error(request, " ".join(error.messages))
        return redirect("governance")
    messages.success(request, f"{target}: {decision} recorded; the next round enforces it.")
    return redirect("governance")
