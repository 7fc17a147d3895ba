"""Fair share (admins): edit the team tree's weights, guarantees and burst limits in one form.

Live validation posts the form to ``fairshare-check`` as the admin types; it answers with the errors
``governance.check_tree`` finds, the diff against the current policy and the entitlements before and
after. Saving goes through ``governance.apply_queue_changes`` with the required reason.
"""

from dataclasses import dataclass

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.template.loader import render_to_string
from django.views.decorators.http import require_POST

from scheduling import charts
from scheduling.forms import QueueFormSet, ReasonForm, queue_initial
from scheduling.models import Queue, Team
from scheduling.selectors import enforcement as enforcement_reads
from scheduling.selectors import fleet
from scheduling.selectors import policies as policies_reads
from scheduling.services import policies
from scheduling.services.governance import apply_queue_changes


@dataclass
class Row:
    queue: Queue
    team: Team
    depth: int
    parent: str
    form: object
    errors: list[str]
    changed: bool = False
    error_fields: frozenset[str] = frozenset()  # the inputs a tree rule blames (weight, guaranteed, ...)


def _require_admin(request: HttpRequest) -> None:
    if not request.user.has_perm("scheduling.edit_entitlements"):
        raise PermissionDenied("Only portal admins edit fair-share policy.")


def _rows(queues, depth, teams, formset, tree_errors: dict[str, list[str]], changes) -> list[Row]:
    changed = {(c.team.pk, c.gpu_model) for c in changes}
    rows = []
    forms_by_queue = {}
    for form in formset.forms:
        try:
            forms_by_queue[int(form["queue"].value())] = form
        except (TypeError, ValueError):
            continue
    for queue in queues:
        form = forms_by_queue.get(queue.pk)
        if form is None:
            continue
        label = f"{queue.team.slug}/{queue.gpu_model or 'any'}:"
        errors = [text for texts in tree_errors.values() for text in texts if text.startswith(label)]
        blamed = frozenset(f for f, texts in tree_errors.items() if any(t.startswith(label) for t in texts))
        parent = teams[queue.team.parent_id].slug if queue.team.parent_id in teams else ""
        rows.append(
            Row(
                queue,
                queue.team,
                depth.get(queue.team_id, 0),
                parent,
                form,
                errors,
                (queue.team_id, queue.gpu_model) in changed,
                blamed,
            )
        )
    return rows


def _evaluate(request: HttpRequest):
    """Bind the posted form and work out its errors, diff and entitlement preview (nothing is saved)."""
    queues, depth, teams = policies_reads.queues_in_tree_order()
    formset = QueueFormSet(request.POST, initial=queue_initial(queues), prefix="q")
    proposal = policies.Proposal()
    if formset.is_valid():
        proposal = policies.propose(queues, [form.cleaned_data for form in formset.forms])
    rows = _rows(queues, depth, teams, formset, proposal.errors, proposal.changes)
    return formset, rows, proposal.changes, proposal.errors, proposal.preview


@login_required
def fairshare(request: HttpRequest) -> HttpResponse:
    _require_admin(request)
    if request.method == "POST":
        formset, rows, changes, tree_errors, preview = _evaluate(request)
        reason = ReasonForm(request.POST)
        if request.POST.get("action") == "save" and formset.is_valid() and not tree_errors and reason.is_valid():
            if not changes:
                messages.info(request, "Nothing changed: the policy is as it was.")
                return redirect("fairshare")
            try:
                apply_queue_changes(changes, by=request.user, reason=reason.cleaned_data["reason"])
            except ValidationError as error:
                tree_errors = error.message_dict
            else:
                count, where = len(changes), enforcement_reads.governance_reach().where()
                saved = f"Saved {count} entitlement change{'' if count == 1 else 's'}"
                messages.success(request, f"{saved} ({reason.cleaned_data['reason']}): {where}.")
                return redirect("fairshare-history")
        if request.POST.get("action") != "save":
            reason = ReasonForm(initial={"reason": request.POST.get("reason", "")})
    else:
        queues, depth, teams = policies_reads.queues_in_tree_order()
        formset = QueueFormSet(initial=queue_initial(queues), prefix="q")
        rows, changes, tree_errors, preview, reason = (
            _rows(queues, depth, teams, formset, {}, []),
            [],
            {},
            [],
            ReasonForm(),
        )
    context = {
        "formset": formset,
        "rows": rows,
        "changes": changes,
        "tree_errors": tree_errors,
        "preview": preview,
        "reason_form": reason,
        "preview_chart": charts.entitlement_chart(preview) if preview and changes else "",
        "capacity": sum(p.gpus_total for p in fleet.pools_now()),
    }
    context["share_enforcement"], context["ray_pools"] = enforcement_reads.share_enforcement()
    return render(request, "scheduling/fairshare.html", context)


@login_required
@require_POST
def fairshare_check(request: HttpRequest) -> HttpResponse:
    """Live validation: an HTML fragment with errors, the diff and the before/after entitlements."""
    _require_admin(request)
    formset, rows, changes, tree_errors, preview = _evaluate(request)
    fragment = render_to_string(
        "scheduling/_fairshare_check.html",
        {"formset": formset, "rows": rows, "changes": changes, "tree_errors": tree_errors, "preview": preview},
        request=request,
    )
    # Always 200: an invalid policy is the expected answer here, carried by data-valid in the fragment.
    return HttpResponse(fragment)


@login_required
def fairshare_history(request: HttpRequest) -> HttpResponse:
    _require_admin(request)
    return render(request, "scheduling/fairshare_history.html", {"versions": policies_reads.queue_history(limit=200)})


@login_required
@require_POST
def fairshare_revert(request: HttpRequest, history_id: int) -> HttpResponse:
    _require_admin(request)
    try:
        queues = policies.revert_change(history_id, by=request.user, reason=request.POST.get("reason", ""))
    except Queue.history.model.DoesNotExist:
        messages.error(request, f"No entitlement version #{history_id}.")
    except ValidationError as error:
        messages.error(request, "Revert refused: " + " ".join(error.messages))
    else:
        restored = "; ".join(f"{q}: {q.weight:g} %, {q.guaranteed}/{q.burst_limit} GPUs" for q in queues)
        messages.success(request, f"Reverted change #{history_id}: {restored}.")
    return redirect("fairshare-history")
