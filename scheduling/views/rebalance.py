"""Rebalance: the pool split now and over the last 24 h, plans waiting for a decision, history.

Everyone in a team (and admins) reads; only admins (``edit_pool_policies``) approve or reject, always with
a reason; signed-in users in no team get 403, like the governance pages. Reads go through the rebalance
service (it recomputes targets from the engine), decisions through ``approve_plan``/``reject_plan``.
"""

from collections import defaultdict

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render

from scheduling.forms import PoolPolicyForm
from scheduling.models import ExpanderDecision, PoolPolicy, RebalancePlan
from scheduling.selectors import fleet as fleet_reads
from scheduling.selectors import rebalance as rebalance_reads
from scheduling.services import pool_policies, rebalance
from scheduling.tasks import apply_plan_step

from .common import posted_version, require_fleet_plans, time_range


def _split_rows(points) -> tuple[list[str], list[tuple]]:
    """Rows of (hour, [(owned, target), ...]) in orchestrator order, for the 24 h table."""
    names = sorted({p.orchestrator for p in points})
    by_hour: dict = defaultdict(dict)
    for p in points:
        by_hour[p.at][p.orchestrator] = p
    rows = [(at, [by_hour[at].get(n) for n in names]) for at in sorted(by_hour, reverse=True)]
    return names, rows


@login_required
def rebalance_overview(request: HttpRequest) -> HttpResponse:
    require_fleet_plans(request, "The rebalancer")
    window = time_range(request, default="24h", allowed=("6h", "24h", "7d"))
    decision = rebalance.decide_now(window.until)
    owned = {pool.name: pool.gpus_total for pool in fleet_reads.pools_now()}  # the overview's figure, read alike
    names, rows = _split_rows(rebalance_reads.split_history(window.since, window.until))
    plans = RebalancePlan.objects.select_related("decided_by")
    context = {
        "window": window,
        "decision": decision,
        # (target, GPUs owned, of them not taking work: draining, drained or down)
        "targets": [(t, owned.get(t.orchestrator, 0), owned.get(t.orchestrator, 0) - t.current_gpus)
                    for t in decision.targets],
        "names": names,
        "rows": rows,
        "waiting": list(plans.filter(state=RebalancePlan.State.PROPOSED).prefetch_related("moves__node",
                                                                                          "moves__source",
                                                                                          "moves__target")),
        "open": list(plans.filter(state__in=(RebalancePlan.State.APPROVED, RebalancePlan.State.APPLYING))),
        "history": list(plans.exclude(state=RebalancePlan.State.PROPOSED)[:30]),
        "expander_decisions": list(ExpanderDecision.objects.all()[:10]),
        "can_decide": request.user.has_perm("scheduling.edit_pool_policies"),
    }
    return render(request, "scheduling/rebalance.html", context)


@login_required
def rebalance_plan(request: HttpRequest, pk: int) -> HttpResponse:
    require_fleet_plans(request, "The rebalancer")
    plan = get_object_or_404(RebalancePlan.objects.select_related("decided_by"), pk=pk)
    if request.method == "POST":
        return _decide(request, plan)
    context = {
        "plan": plan,
        "moves": list(plan.moves.select_related("node", "source", "target")),
        "changes": rebalance.recheck_plan(plan) if plan.state == RebalancePlan.State.PROPOSED else [],
        "history": list(plan.history.select_related("history_user").order_by("history_date")),
        "can_decide": request.user.has_perm("scheduling.edit_pool_policies"),
    }
    return render(request, "scheduling/rebalance_plan.html", context)


def _decide(request: HttpRequest, plan: RebalancePlan) -> HttpResponse:
    if not request.user.has_perm("scheduling.edit_pool_policies"):
        raise PermissionDenied("Only portal admins approve or reject rebalance plans.")
    decision = request.POST.get("decision")
    if decision not in ("approve", "reject"):
        messages.error(request, "Choose approve or reject.")
        return redirect("rebalance-plan", pk=plan.pk)
    decided = {"by": request.user, "reason": request.POST.get("reason", ""), "seen_version": posted_version(request)}
    try:
        if decision == "approve":  # re-checked against the latest round; changed facts need the admin's tick
            rebalance.approve_plan(plan, accept_changes=request.POST.get("accept_changes") == "1", **decided)
        else:
            rebalance.reject_plan(plan, **decided)
    except ValidationError as error:
        messages.error(request, " ".join(error.messages))
        return redirect("rebalance-plan", pk=plan.pk)
    if decision == "approve":
        apply_plan_step.delay(plan.pk)
    messages.success(request, f"{plan} {decision}d: {request.POST.get('reason', '').strip()}")
    return redirect("rebalance")


# --- pool policies (admins): the calendar the rebalancer follows; every edit validated and audited ---


def _require_policy_admin(request: HttpRequest) -> None:
    if not request.user.has_perm("scheduling.edit_pool_policies"):
        raise PermissionDenied("Only portal admins edit pool policies.")


@login_required
def rebalance_policies(request: HttpRequest, pk: int | None = None) -> HttpResponse:
    _require_policy_admin(request)
    policy = get_object_or_404(PoolPolicy, pk=pk) if pk else None
    form = PoolPolicyForm(request.POST or None, instance=policy)
    if request.method == "POST" and request.POST.get("action") == "delete" and policy is not None:
        try:
            pool_policies.delete_policy(policy, by=request.user, reason=request.POST.get("reason", ""))
        except ValidationError as error:
            messages.error(request, " ".join(error.messages))
            return redirect("rebalance-policy", pk=policy.pk)
        messages.success(request, f"Deleted {policy}.")
        return redirect("rebalance-policies")
    if request.method == "POST" and form.is_valid():
        try:
            saved = pool_policies.save_policy(
                form.save(commit=False),
                by=request.user,
                reason=form.cleaned_data["reason"],
                seen_version=form.cleaned_data.get("seen_version"),
            )
        except ValidationError as error:
            for field, texts in error.message_dict.items():
                for text in texts:
                    form.add_error(field if field in form.fields else None, text)
        else:
            messages.success(request, f"Saved {saved}: {form.cleaned_data['reason']}")
            return redirect("rebalance-policies")
    context = {
        "form": form,
        "policy": policy,
        "policies": PoolPolicy.objects.select_related("orchestrator"),
        "history": PoolPolicy.history.select_related("history_user", "orchestrator").order_by("-history_date")[:50],
    }
    return render(request, "scheduling/rebalance_policies.html", context)
