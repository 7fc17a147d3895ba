"""A node's page: owner, the jobs on it now, its history; an admin's drain goes to a rebalance plan to approve.

Read by members of a team and by admins, like the fleet pages that link here (the fragmentation heatmap, the
rebalance plans); the jobs shown follow ``access.workloads_visible_to``."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render

from scheduling.models import RebalancePlan
from scheduling.selectors import nodes as node_reads
from scheduling.selectors.rebalance import OPEN_STATES
from scheduling.services import node_drain

from .common import require_fleet_plans


@login_required
def node_detail(request: HttpRequest, name: str) -> HttpResponse:
    require_fleet_plans(request, "A node's page")
    node = node_reads.node_or_404(name)
    jobs = node_reads.jobs_on(node, request.user)
    can_drain = request.user.has_perm("scheduling.edit_pool_policies")
    if request.method == "POST" and can_drain:
        try:
            plan = node_drain.propose_drain(
                node, by=request.user, reason=request.POST.get("reason", ""), drain_cost_gpu_s=jobs.drain_cost_gpu_s,
            )
        except ValidationError as error:
            messages.error(request, " ".join(error.messages))
            return redirect("node-detail", name=node.key)
        messages.success(request, f"Drain of {node.name} proposed as plan #{plan.pk}: approve or reject it here.")
        return redirect("rebalance-plan", pk=plan.pk)
    context = {
        "node": node,
        "jobs": jobs,
        "history": node_reads.ownership_history(node),
        "plans": node_reads.plans_of(node),
        "can_drain": can_drain,
        "open_plan": RebalancePlan.objects.filter(state__in=OPEN_STATES).first() if can_drain else None,
    }
    return render(request, "scheduling/node_detail.html", context)
