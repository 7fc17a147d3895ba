"""Quota requests: file one with a feasibility check first, decide it, and see the decision."""

import uuid

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render

from scheduling.filters import QuotaRequestFilter
from scheduling.forms import AmendRequestForm, DecisionForm, ExtendGrantForm, QuotaRequestForm
from scheduling.models import Node, QuotaRequest
from scheduling.selectors import access, over_cap
from scheduling.selectors import enforcement as enforcement_reads
from scheduling.selectors import first_step as first_step_reads
from scheduling.selectors.teams import teams_now
from scheduling.services import feasibility, idempotency, notifications, quota
from scheduling.tables import QuotaRequestTable

from .common import paginate
from .page_cache import served_while_unchanged

# Every showing of the request form asks the same thing of its key: to file one request. (The API's key also
# covers the body: there a key sent again with another body is a client error.)
FORM_FINGERPRINT = "quota-request-form"


@login_required
@served_while_unchanged
def quota_list(request: HttpRequest) -> HttpResponse:
    requests = QuotaRequest.objects.select_related("team", "requester", "orchestrator")
    request_filter = QuotaRequestFilter(
        request.GET, queryset=access.quota_requests_visible_to(request.user, requests), request=request
    )
    table = QuotaRequestTable(request_filter.qs)
    paginate(request, table, 25)
    decidable = access.quota_requests_decidable_by(request.user).select_related("team", "requester")
    awaiting = QuotaRequestTable(decidable, prefix="a-")
    paginate(request, awaiting, 10)
    return render(
        request,
        "scheduling/quota_list.html",
        {"table": table, "filter": request_filter, "awaiting": awaiting},
    )


def _request_form(request: HttpRequest, data=None) -> QuotaRequestForm:
    teams = access.teams_visible_to(request.user)
    models = sorted(set(Node.objects.values_list("gpu_model", flat=True)))
    initial = {}
    if data is None:
        asked = request.GET.get("team")
        # ?team=<slug> (links from a team page or a wait explanation), else the only team one can choose
        chosen = next((t.pk for t in teams if t.slug == asked), None) if asked else None
        initial = {"team": chosen or (teams[0].pk if len(teams) == 1 else None), "idempotency_key": uuid.uuid4().hex}
    return QuotaRequestForm(data, teams=teams, gpu_models=models, initial=initial)


@login_required
def quota_new(request: HttpRequest) -> HttpResponse:
    # Beside the form, what each team one may ask for has and uses now: sizing a request starts there.
    standing = over_cap.with_notes(teams_now(access.teams_visible_to(request.user)))
    # In no team, the team list is empty: the page says why and whom to ask instead of an empty choice.
    no_team = access.in_no_team(request.user)
    ask = first_step_reads.admins_to_ask() if no_team else ""
    if request.method != "POST":
        context = {"form": _request_form(request), "standing": standing, "no_team": no_team, "ask": ask}
        return render(request, "scheduling/quota_form.html", context)
    form = _request_form(request, _with_fit(request.POST))
    context = {"form": form, "standing": standing, "no_team": no_team, "ask": ask}
    if form.is_valid():
        data = form.cleaned_data
        check = feasibility.check_request(
            data["team"], data["gpus"], data["gpu_model"], data["starts_at"], data["ends_at"]
        )
        context["check"] = check
        if request.POST.get("action") == "submit":
            try:
                outcome = _submit_once(request, data)
            except PermissionDenied as error:
                form.add_error("team", str(error))
            except ValidationError as error:
                _errors_to_form(form, error)
            except idempotency.KeyReused as error:
                form.add_error(None, f"This form {error}.")
            else:
                return _submitted(request, outcome)
    return render(request, "scheduling/quota_form.html", context)


def _with_fit(posted):
    """The form as posted, or with a "What would fit" suggestion taken (``fit=gpus:12`` or
    ``fit=period:<start>/<end>``): the values go through the form's rules and the check like typed ones."""
    choice = posted.get("fit", "")
    kind, _, value = choice.partition(":")
    data = posted.copy()
    if kind == "gpus":
        data["gpus"] = value
    elif kind == "period":
        data["starts_at"], _, data["ends_at"] = value.partition("/")
    return data


def _submit_once(request: HttpRequest, data: dict) -> idempotency.Outcome:
    """File the request, once per form key: the same form sent again finds the first request, even if edited
    in between (the key belongs to one showing of the form)."""

    def work():
        created = quota.create_request(
            requester=request.user,
            team=data["team"],
            gpus=data["gpus"],
            gpu_model=data["gpu_model"],
            orchestrator=data["orchestrator"],
            starts_at=data["starts_at"],
            ends_at=data["ends_at"],
            justification=data["justification"],
        )
        return 302, {}, created

    if not data.get("idempotency_key"):  # a form from before keys, or a script: no protection asked
        status_code, body, created = work()
        return idempotency.Outcome(status_code, body, created.pk, replayed=False)
    return idempotency.once(request.user, data["idempotency_key"], FORM_FINGERPRINT, work)


def _submitted(request: HttpRequest, outcome: idempotency.Outcome) -> HttpResponse:
    created = QuotaRequest.objects.select_related("team").get(pk=outcome.quota_request_id)
    if outcome.replayed:
        messages.info(request, f"Request #{created.pk} was already sent from this form; here it is.")
    else:
        names = notifications.decider_names(created)
        who = ", ".join(names) if names else "no one yet: the team has no lead and the portal no admin"
        messages.success(request, f"Request #{created.pk} for {created.team} sent to {who}, who decide it.")
    return redirect("quota-detail", pk=created.pk)


def _errors_to_form(form, error: ValidationError) -> None:
    for field, texts in getattr(error, "message_dict", {"__all__": error.messages}).items():
        for text in texts:
            form.add_error(field if field in form.fields else None, text)


@login_required
def quota_detail(request: HttpRequest, pk: int) -> HttpResponse:
    item = get_object_or_404(
        QuotaRequest.objects.select_related("team", "requester", "decided_by", "orchestrator"), pk=pk
    )
    if not request.user.has_perm("scheduling.view_quota_request", item):
        raise Http404("No quota request matches the given query.")
    can_decide = request.user.has_perm("scheduling.decide_quota_request", item)
    form = DecisionForm(request.POST or None)
    if request.method == "POST" and request.POST.get("action") == "withdraw":
        return _withdraw(request, item)
    amend_form = AmendRequestForm.for_request(item, request.POST if request.POST.get("action") == "amend" else None)
    if amend_form.is_bound and _amend(request, item, amend_form):
        return redirect("quota-detail", pk=item.pk)
    extend_form = ExtendGrantForm(request.POST if request.POST.get("action") == "extend" else None, prefix="extend")
    if extend_form.is_bound and (extension := _extend(request, item, extend_form)):
        return redirect("quota-detail", pk=extension.pk)
    if request.method == "POST" and not (amend_form.is_bound or extend_form.is_bound):
        if not can_decide:
            raise PermissionDenied("Only a lead of the team (not the requester) or an admin decides this request.")
        if form.is_valid() and _decide(request, item, form):
            return redirect("quota-detail", pk=item.pk)
    check = None
    if item.state == QuotaRequest.State.SUBMITTED:
        check = feasibility.check_request(item.team, item.gpus, item.gpu_model, item.starts_at, item.ends_at, item.pk)
    history = item.history.select_related("history_user").order_by("history_date")
    grant = getattr(item, "grant", None) if item.state != QuotaRequest.State.SUBMITTED else None
    reach = enforcement_reads.governance_reach() if grant else None
    pinned = grant.orchestrator.name if grant and grant.orchestrator else ""
    return render(
        request,
        "scheduling/quota_detail.html",
        {
            "item": item,
            "form": form,
            "can_decide": can_decide,
            "check": check,
            "history": history,
            "amendments": [h for h in history if (h.history_change_reason or "").startswith("amended")],
            "amend_form": amend_form,
            "extend_form": extend_form,
            "extensions": item.extensions.order_by("created_at"),
            "grant": grant,
            "enforcement": enforcement_reads.team_enforcement(item.team) if grant else [],
            "reach": reach,
            "grant_where": reach.where(pinned) if reach else "",
            "grant_enforced": reach.enforces(pinned) if reach else False,
        },
    )


def _withdraw(request: HttpRequest, item: QuotaRequest) -> HttpResponse:
    try:
        quota.withdraw_request(item.pk, by=request.user, reason=request.POST.get("comment", ""))
    except ValidationError as error:
        for text in error.messages:
            messages.error(request, f"Not withdrawn: {text}")
    else:
        messages.success(
            request, f"Request #{item.pk} withdrawn: nobody will decide it now. File a new one if plans change again."
        )
    return redirect("quota-detail", pk=item.pk)


def _amend(request: HttpRequest, item: QuotaRequest, form: AmendRequestForm) -> bool:
    """Amend from the page; errors stay on the form, named by field."""
    if not form.is_valid():
        return False
    changes = {name: value for name, value in form.cleaned_data.items() if name != "reason"}
    try:
        quota.amend_request(item.pk, by=request.user, changes=changes, reason=form.cleaned_data["reason"])
    except ValidationError as error:
        _errors_to_form(form, error)
        return False
    item.refresh_from_db()
    told = notifications.who_hears_of_amendment(item)
    messages.success(request, f"Request #{item.pk} amended; it still awaits a decision; {told}.")
    return True


def _extend(request: HttpRequest, item: QuotaRequest, form: ExtendGrantForm) -> QuotaRequest | None:
    """Ask for an extension from the granted request's page; errors stay on the form, named by field."""
    if not form.is_valid():
        return None
    try:
        extension = quota.extend_grant(item.pk, by=request.user, **form.cleaned_data)
    except ValidationError as error:
        _errors_to_form(form, error)
        return None
    names = ", ".join(notifications.decider_names(extension)) or "no one yet"
    messages.success(request, f"Extension requested as #{extension.pk}; it goes to {names}, who decide it.")
    return extension


def _decide(request: HttpRequest, item: QuotaRequest, form: DecisionForm) -> bool:
    decision, comment = form.cleaned_data["decision"], form.cleaned_data["comment"]
    seen = form.cleaned_data.get("version")  # the request as the page showed it
    try:
        if decision == "approve":
            quota.approve_request(item.pk, by=request.user, comment=comment, seen_version=seen)
        elif decision == "deny":
            quota.deny_request(item.pk, by=request.user, comment=comment, seen_version=seen)
        else:
            quota.revoke_grant(item.grant.pk, by=request.user, reason=comment)
    except (ValidationError, QuotaRequest.grant.RelatedObjectDoesNotExist) as error:
        texts = error.messages if isinstance(error, ValidationError) else ["this request has no grant to revoke."]
        for text in texts:
            form.add_error(None, text)
        return False
    item.refresh_from_db()
    told = notifications.who_hears_of_decision(item)
    messages.success(request, f"Request #{item.pk} {item.get_state_display().lower()}; {told}.")
    return True
