"""Quota requests: submit, decide, activate and expire, with the capacity check under a lock.

Whoever calls (a page, the API), the people concerned hear of it: deciders when a request is submitted,
the requester when it is decided or revoked, by mail sent once the transaction commits (a rolled-back
decision mails nobody).
"""

from collections.abc import Callable
from datetime import datetime, timedelta

from django.conf import settings
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.db.models import Sum
from django.utils import timezone

from scheduling.limits import JUSTIFICATION_MAX_CHARS
from scheduling.models import Node, QuotaGrant, QuotaRequest, Team
from scheduling.models.quota import period_errors
from scheduling.wording import plural

from . import governance_trigger, notifications, versions
from .audit import require_reason, stamp_author
from .capacity import check_new_promise, lock_capacity, refusal

State = QuotaRequest.State


def _audited_save(obj, *, by, reason: str) -> None:
    stamp_author(obj, by=by, reason=reason)
    obj.save()


def _notify_on_commit(send: Callable[..., int], request_id: int) -> None:
    """``send`` (a ``notifications`` function) the request as committed, after the commit."""

    def deliver() -> None:
        committed = QuotaRequest.objects.select_related("team", "requester", "decided_by").get(pk=request_id)
        send(committed, base_url=settings.GPUPORTAL_BASE_URL)

    transaction.on_commit(deliver)


def _move(request: QuotaRequest, state: str) -> None:
    if not request.can_move_to(state):
        raise ValidationError({"state": f"a {request.state} request cannot become {state}."})
    request.state = state


def create_request(
    *,
    requester,
    team: Team,
    gpus: int,
    starts_at: datetime,
    ends_at: datetime,
    justification: str,
    gpu_model: str = "",
    orchestrator=None,
    submit: bool = True,
    extends: QuotaRequest | None = None,
) -> QuotaRequest:
    if not requester.has_perm("scheduling.submit_quota_request", team):
        raise PermissionDenied(f"{requester} is not a member of {team.slug}.")
    request = QuotaRequest(
        requester=requester,
        team=team,
        gpus=gpus,
        gpu_model=gpu_model,
        orchestrator=orchestrator,
        starts_at=starts_at,
        ends_at=ends_at,
        justification=justification.strip(),
        extends=extends,
    )
    validate_request_fields(request)
    with transaction.atomic():
        _audited_save(request, by=requester, reason="created")
        if submit:
            submit_request(request, by=requester)
    return request


def validate_request_fields(request: QuotaRequest) -> None:
    errors = period_errors(request.starts_at, request.ends_at, now=timezone.now())
    if request.gpus is None or request.gpus <= 0:
        errors["gpus"] = "GPUs must be a whole number greater than 0."
    if not request.justification:
        errors["justification"] = "a justification is required."
    elif len(request.justification) > JUSTIFICATION_MAX_CHARS:
        errors["justification"] = f"at most {JUSTIFICATION_MAX_CHARS} characters, got {len(request.justification)}."
    errors.update(orchestrator_errors(request.orchestrator, request.gpu_model))
    if errors:
        raise ValidationError(errors)
    request.full_clean()


def orchestrator_errors(orchestrator, gpu_model: str) -> dict[str, str]:
    """A grant that names an orchestrator is enforced there only: it must hold GPUs of the grant's model (any
    GPU for an any-model grant), or nothing could ever enforce it. Asked on filing, amending and approving."""
    if orchestrator is None:
        return {}
    held = dict(
        Node.objects.filter(orchestrator=orchestrator, gpu_total__gt=0)
        .values("gpu_model")
        .annotate(total=Sum("gpu_total"))
        .values_list("gpu_model", "total")
    )
    if (held.get(gpu_model, 0) if gpu_model else sum(held.values())) > 0:
        return {}
    has = ", ".join(f"{gpus} {model or 'unnamed'}" for model, gpus in sorted(held.items())) or "no GPUs"
    wanted = f"{gpu_model} GPUs" if gpu_model else "GPUs"
    return {
        "orchestrator": f"{orchestrator.name} has no {wanted} (it has {has}): a grant there could never be "
        "enforced. Name another orchestrator or none."
    }


@transaction.atomic
def submit_request(request: QuotaRequest, *, by) -> QuotaRequest:
    _move(request, State.SUBMITTED)
    _audited_save(request, by=by, reason="submitted")
    _notify_on_commit(notifications.request_submitted, request.pk)
    return request


@transaction.atomic
def approve_request(
    request_id: int, *, by, comment: str = "", now: datetime | None = None, seen_version: int | None = None
) -> QuotaGrant:
    """Approve and create the grant. The capacity lock serialises approvals so two admins approving at
    once see each other's grants and cannot promise the same GPUs twice. ``seen_version``: the request as the
    decider saw it; an amendment since refuses the decision (services/versions.py)."""
    lock_capacity()
    request = QuotaRequest.objects.select_for_update(of=("self",)).select_related("team").get(pk=request_id)
    versions.require_version(request, seen_version, f"Request #{request.pk}")
    _require_decider(request, by)
    _move(request, State.APPROVED)
    _require_bounded_period(request)
    _require_enforceable(request)
    _require_capacity(request)
    request.decided_by, request.decided_at, request.decision_comment = by, timezone.now(), comment
    _audited_save(request, by=by, reason=comment or "approved")
    grant = QuotaGrant(request=request, starts_at=request.starts_at, ends_at=request.ends_at, **_same_gpus(request))
    _audited_save(grant, by=by, reason=comment or "approved")
    sync_grant_states(now=now)
    _notify_on_commit(notifications.request_decided, request.pk)
    governance_trigger.request_round()  # the clusters raise the team's caps in seconds, not at the next round
    return grant


@transaction.atomic
def deny_request(request_id: int, *, by, comment: str, seen_version: int | None = None) -> QuotaRequest:
    request = QuotaRequest.objects.select_for_update().get(pk=request_id)
    versions.require_version(request, seen_version, f"Request #{request.pk}")
    _require_decider(request, by)
    if not comment.strip():
        raise ValidationError({"decision_comment": "say why the request is denied."})
    _move(request, State.DENIED)
    request.decided_by, request.decided_at, request.decision_comment = by, timezone.now(), comment
    _audited_save(request, by=by, reason=comment)
    _notify_on_commit(notifications.request_decided, request.pk)
    return request


@transaction.atomic
def withdraw_request(request_id: int, *, by, reason: str = "") -> QuotaRequest:
    """The requester takes back a request nobody has decided yet (plans changed, or to file a corrected one);
    it stays in the history as withdrawn, with who and why."""
    request = QuotaRequest.objects.select_for_update().get(pk=request_id)
    if request.requester_id != by.pk:
        raise PermissionDenied("only the person who asked may withdraw a request; a lead or an admin denies it.")
    _move(request, State.WITHDRAWN)
    _audited_save(request, by=by, reason=require_reason(reason.strip() or "withdrawn by the requester"))
    return request


EXTENDABLE_GRANT_STATES = (QuotaGrant.State.SCHEDULED, QuotaGrant.State.ACTIVE)


@transaction.atomic
def extend_grant(request_id: int, *, by, ends_at: datetime, justification: str) -> QuotaRequest:
    """The requester asks to keep a granted request's GPUs past its end: a new request from the grant's end to
    ``ends_at``, same team, GPUs, model and orchestrator, decided and promise-checked like any new request."""
    # Locked so two extensions sent at once cannot both pass the one-pending-extension rule.
    granted = QuotaRequest.objects.select_for_update(of=("self",)).select_related("team", "grant").get(pk=request_id)
    if granted.requester_id != by.pk:
        raise PermissionDenied("only the person who asked may extend a grant; others file a request of their own.")
    grant = getattr(granted, "grant", None)
    if grant is None or grant.state not in EXTENDABLE_GRANT_STATES:
        raise ValidationError({"ends_at": f"a {granted.state} request has no live grant to extend."})
    if ends_at <= grant.ends_at:
        raise ValidationError(
            {"ends_at": f"the new end must be after the grant's end, {grant.ends_at:%Y-%m-%d %H:%M}."}
        )
    if granted.extensions.filter(state=State.SUBMITTED).exists():
        raise ValidationError({"ends_at": "an extension of this grant already awaits a decision; amend that one."})
    return create_request(
        requester=by,
        starts_at=grant.ends_at,
        ends_at=ends_at,
        justification=justification,
        extends=granted,
        **_same_gpus(granted),
    )


def _same_gpus(request: QuotaRequest) -> dict:
    """What a grant, or an extension, carries over from its request: whose GPUs, how many, which, where."""
    return {
        "team": request.team,
        "gpus": request.gpus,
        "gpu_model": request.gpu_model,
        "orchestrator": request.orchestrator,
    }


AMENDABLE_FIELDS = ("gpus", "starts_at", "ends_at", "justification")


@transaction.atomic
def amend_request(request_id: int, *, by, changes: dict, reason: str) -> QuotaRequest:
    """The requester corrects a request nobody has decided yet (amount, dates, justification) instead of
    withdrawing and filing anew; the history row says what changed, who and why, and the deciders hear of it."""
    request = QuotaRequest.objects.select_for_update().select_related("team").get(pk=request_id)
    if request.requester_id != by.pk:
        raise PermissionDenied("only the person who asked may amend a request; a lead or an admin decides it.")
    if request.state != State.SUBMITTED:
        raise ValidationError({"state": f"a {request.state} request cannot be amended: it is already decided."})
    before = {name: getattr(request, name) for name in AMENDABLE_FIELDS}
    for name in AMENDABLE_FIELDS:
        if name in changes:
            setattr(request, name, changes[name].strip() if name == "justification" else changes[name])
    what = describe_amendment(before, request)
    if not what:
        raise ValidationError({"gpus": "nothing to amend: the GPUs, dates and justification are as they were."})
    validate_request_fields(request)
    _audited_save(request, by=by, reason=f"amended ({what}): {require_reason(reason)}")
    _notify_on_commit(notifications.request_amended, request.pk)
    return request


def describe_amendment(before: dict, request: QuotaRequest) -> str:
    """'GPUs 8 → 16; end 2026-12-12 00:00 → 2026-12-14 00:00': what a decider needs to see changed."""
    labels = {"gpus": "GPUs", "starts_at": "start", "ends_at": "end"}
    shown = lambda value: f"{value:%Y-%m-%d %H:%M}" if isinstance(value, datetime) else str(value)  # noqa: E731
    parts = [
        f"{label} {shown(before[name])} → {shown(getattr(request, name))}"
        for name, label in labels.items()
        if before[name] != getattr(request, name)
    ]
    if before["justification"] != request.justification:
        parts.append("justification rewritten")
    return "; ".join(parts)


@transaction.atomic
def revoke_grant(grant_id: int, *, by, reason: str) -> QuotaGrant:
    grant = QuotaGrant.objects.select_for_update().select_related("request").get(pk=grant_id)
    if not by.has_perm("scheduling.decide_quota_request", grant.request):
        raise PermissionDenied("only the team's lead or an admin may revoke a grant.")
    if grant.state not in (QuotaGrant.State.SCHEDULED, QuotaGrant.State.ACTIVE):
        raise ValidationError({"state": f"a {grant.state} grant cannot be revoked."})
    grant.state = QuotaGrant.State.REVOKED
    _audited_save(grant, by=by, reason=reason)
    _move(grant.request, State.REVOKED)
    _audited_save(grant.request, by=by, reason=reason)
    _notify_on_commit(notifications.request_decided, grant.request_id)
    governance_trigger.request_round()
    return grant


def _require_bounded_period(request: QuotaRequest) -> None:
    """Requests filed before periods were bounded (0001-01-01 to 9999-12-31 was accepted) are not approvable:
    the period is judged by the rules as of its filing, so a request valid when filed stays approvable."""
    errors = period_errors(request.starts_at, request.ends_at, now=request.created_at)
    if errors:
        raise ValidationError(errors)


def _require_enforceable(request: QuotaRequest) -> None:
    """A request filed before the orchestrator lost its GPUs of the model (or before this rule) is refused too."""
    errors = orchestrator_errors(request.orchestrator, request.gpu_model)
    if errors:
        raise ValidationError(errors)


def _require_capacity(request: QuotaRequest) -> None:
    """Real GPUs must be able to serve this grant on top of every guarantee and grant, at every instant."""
    check = check_new_promise(
        request.gpus, request.gpu_model, request.starts_at, request.ends_at, exclude_request=request.pk
    )
    if not check.fits:
        period = f"between {request.starts_at:%Y-%m-%d %H:%M} and {request.ends_at:%Y-%m-%d %H:%M}"
        raise ValidationError(
            {
                "gpus": f"{plural(request.gpus, 'GPU')} {'exceeds' if request.gpus == 1 else 'exceed'} the unpromised "
                f"{request.gpu_model or 'fleet'} capacity of "
                f"{check.room} GPUs {period}: {refusal(check)}."
            }
        )


def _require_decider(request: QuotaRequest, by) -> None:
    if not by.has_perm("scheduling.decide_quota_request", request):
        raise PermissionDenied(f"{by} may not decide requests of {request.team.slug}.")


@transaction.atomic
def sync_grant_states(now: datetime | None = None) -> dict[str, int]:
    """Activate grants whose period started and expire those whose period ended (idempotent)."""
    now = now or timezone.now()
    counts = {"activated": 0, "expired": 0}
    due = QuotaGrant.objects.select_for_update().select_related("request")
    for grant in due.filter(state=QuotaGrant.State.SCHEDULED, starts_at__lte=now, ends_at__gt=now):
        _set_grant_state(grant, QuotaGrant.State.ACTIVE, State.ACTIVE)
        counts["activated"] += 1
    live = (QuotaGrant.State.SCHEDULED, QuotaGrant.State.ACTIVE)
    for grant in due.filter(state__in=live, ends_at__lte=now):
        _set_grant_state(grant, QuotaGrant.State.EXPIRED, State.EXPIRED)
        counts["expired"] += 1
    return counts


def _set_grant_state(grant: QuotaGrant, grant_state: str, request_state: str) -> None:
    grant.state = grant_state
    _audited_save(grant, by=None, reason=f"period {'started' if grant_state == 'active' else 'ended'}")
    _move(grant.request, request_state)
    _audited_save(grant.request, by=None, reason=grant.state)


def remind_expiring_grants(now: datetime | None = None) -> int:
    """Tell the requester and the team's leads, once per grant, that a live grant ends within
    ``GPUPORTAL_GRANT_REMINDER_DAYS``, in time to ask for an extension. Returns how many grants were reminded."""
    now = now or timezone.now()
    horizon = now + timedelta(days=settings.GPUPORTAL_GRANT_REMINDER_DAYS)
    due = QuotaGrant.objects.filter(
        state__in=(QuotaGrant.State.SCHEDULED, QuotaGrant.State.ACTIVE),
        ends_at__gt=now,
        ends_at__lte=horizon,
        expiry_reminded_at__isnull=True,
    )
    reminded = 0
    for grant_id in due.values_list("pk", flat=True):
        reminded += _remind_once(grant_id, now=now)
    return reminded


@transaction.atomic
def _remind_once(grant_id: int, *, now: datetime) -> int:
    """One grant under its row lock: a second beat (or worker) finds it reminded and sends nothing."""
    grant = (
        QuotaGrant.objects.select_for_update(of=("self",)).select_related("request__requester", "team").get(pk=grant_id)
    )
    if grant.expiry_reminded_at is not None:
        return 0
    grant.expiry_reminded_at = now
    grant.expiry_reminded_to = notifications.who_hears_of_expiry(grant)
    _audited_save(grant, by=None, reason=f"reminder of the end: {grant.expiry_reminded_to}")
    transaction.on_commit(lambda: notifications.grant_expiring(grant, base_url=settings.GPUPORTAL_BASE_URL))
    return 1
