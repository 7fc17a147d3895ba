"""Tell the people an event concerns: deciders when a request arrives, the requester after, leads and admins of
reminders, reclaims, drift and plans. Every message goes to three places (issue 33 item 13): the recipients'
in-portal inbox (always: sites without mail), their mail where they have an address, and the chat webhooks of
the site and the team (services/chat_webhooks.py). One function, :func:`tell`, does all three."""

from django.conf import settings
from django.core.mail import send_mass_mail
from django.urls import reverse

from scheduling.models import Notification, QuotaRequest
from scheduling.rules import leads_above, portal_admins

from . import chat_webhooks, inbox

Kind = Notification.Kind


def tell(people, *, kind: str, subject: str, body: str, path: str, team_id: int | None,
          mail_to: list[str] | None = None, base_url: str | None = None) -> int:
    """The inbox row of every person, the mail (to ``mail_to``, else to those of ``people`` with an address)
    and the chat message; returns the number of mails sent, as the callers always have. ``path``: the page
    the message is about (inside the portal)."""
    people = list(people)
    inbox.post(people, kind=kind, subject=subject, body=body, link=path)
    link = f"{(base_url or settings.GPUPORTAL_BASE_URL).rstrip('/')}{path}" if path else ""
    chat_webhooks.enqueue(team_id, chat_webhooks.Message(subject=subject, body=body, link=link))
    recipients = mail_to if mail_to is not None else sorted({p.email for p in people if p.email})
    if not recipients:
        return 0
    return _send(f"[gpuportal] {subject}", f"{body}\n\n{link}\n" if link else body, recipients)


def _send(subject: str, body: str, recipients: list[str]) -> int:
    """One mail to ``recipients``; a mail server that fails never fails the decision that caused it."""
    return send_mass_mail([(subject, body, settings.DEFAULT_FROM_EMAIL, recipients)], fail_silently=True)


def deciders_of(request: QuotaRequest) -> list[str]:
    """Addresses of the leads of the request's team and the teams above it, or of the admins if none
    of those leads has an address; never the requester."""
    emails = _addresses(leads_above(request.team_id).exclude(pk=request.requester_id))
    if not emails:
        emails = _addresses(portal_admins().exclude(pk=request.requester_id))
    return emails


def deciders(request: QuotaRequest):
    """Who decides ``request``: the leads of its team and the teams above it, else the portal admins; never the
    requester (the people deciders_of mails, also those without an address, whose inbox hears of it)."""
    leads = leads_above(request.team_id).exclude(pk=request.requester_id)
    return leads if leads.exists() else portal_admins().exclude(pk=request.requester_id)


def decider_names(request: QuotaRequest) -> list[str]:
    """Who decides ``request``, by username, as a page tells the requester."""
    return sorted(deciders(request).values_list("username", flat=True))


def _addresses(users) -> list[str]:
    return sorted(set(users.exclude(email="").values_list("email", flat=True)))


def _extension_note(request: QuotaRequest) -> str:
    if request.extends_id is None:
        return ""
    return f"It extends request #{request.extends_id}, whose grant ends at this request's start.\n\n"


def _path(request: QuotaRequest) -> str:
    return reverse("quota-detail", args=[request.pk])


def _gpus(request: QuotaRequest, anything: str = "GPUs") -> str:
    return f"{request.gpus} {request.gpu_model or anything}"


def _period(request) -> str:
    return f"from {request.starts_at:%Y-%m-%d %H:%M} to {request.ends_at:%Y-%m-%d %H:%M} (UTC)"


def request_submitted(request: QuotaRequest, *, base_url: str) -> int:
    subject = f"Quota request #{request.pk}: {_gpus(request)} for {request.team}"
    body = (
        f"{request.requester} asks for {_gpus(request, 'GPUs of any model')} for team {request.team} "
        f"{_period(request)}.\n\n{_extension_note(request)}Justification:\n{request.justification}\n\n"
        f"Approve or deny on the request's page."
    )
    return tell(deciders(request), kind=Kind.QUOTA, subject=subject, body=body, path=_path(request),
                 team_id=request.team_id, mail_to=deciders_of(request), base_url=base_url)


def request_amended(request: QuotaRequest, *, base_url: str) -> int:
    change = request.history.order_by("-history_date").values_list("history_change_reason", flat=True).first()
    subject = f"Quota request #{request.pk} amended by {request.requester}"
    body = (
        f"{request.requester} amended request #{request.pk} for team {request.team}, still awaiting a decision: "
        f"{change}.\n\nIt now asks for {_gpus(request, 'GPUs of any model')} {_period(request)}.\n\n"
        f"Approve or deny on the request's page."
    )
    return tell(deciders(request), kind=Kind.QUOTA, subject=subject, body=body, path=_path(request),
                 team_id=request.team_id, mail_to=deciders_of(request), base_url=base_url)


def who_hears_of_amendment(request: QuotaRequest) -> str:
    """What to tell the requester about the message ``request_amended`` sends: to whom, and how."""
    recipients = deciders_of(request)
    if recipients:
        return f"an email goes to {', '.join(recipients)}"
    return (
        "no decider has an email address, so nobody was emailed: they see the change in their portal inbox "
        "and on the request's page"
    )


def who_hears_of_decision(request: QuotaRequest) -> str:
    """What to tell the decider about the message ``request_decided`` sends: to whom, and how."""
    requester = request.requester
    if requester.email:
        return f"an email goes to {requester} at {requester.email}"
    return (
        f"{requester} has no email address, so nobody was emailed: they see the decision in their portal inbox "
        "and on the request's page"
    )


def request_decided(request: QuotaRequest, *, base_url: str) -> int:
    verb = request.get_state_display().lower()
    subject = f"Quota request #{request.pk} {verb}"
    body = (
        f"Your request for {_gpus(request)} for {request.team} was {verb} by {request.decided_by}.\n\n"
        f"Comment: {request.decision_comment or '(none)'}"
    )
    return tell([request.requester], kind=Kind.QUOTA, subject=subject, body=body, path=_path(request),
                 team_id=request.team_id, base_url=base_url)


def expiry_audience(grant) -> list:
    """The requester and the leads of the grant's team and the teams above it: who hears that a grant ends."""
    people = {grant.request.requester.pk: grant.request.requester}
    people.update({lead.pk: lead for lead in leads_above(grant.team_id).order_by("username")})
    return list(people.values())


def who_hears_of_expiry(grant) -> str:
    """In words, who the reminder reaches by email and who has no address ('sent to rita at r@x; leo has none')."""
    audience = expiry_audience(grant)
    reached = [f"{person} at {person.email}" for person in audience if person.email]
    missed = [str(person) for person in audience if not person.email]
    told = f"sent to {', '.join(reached)}" if reached else "nobody could be emailed"
    return told + (f"; no email address for {', '.join(missed)} (their portal inbox has it)" if missed else "")


def grant_expiring(grant, *, base_url: str) -> int:
    request = grant.request
    subject = f"Grant of request #{request.pk} ends {grant.ends_at:%Y-%m-%d %H:%M} UTC"
    body = (
        f"Team {grant.team}'s grant of {grant.gpus} {grant.gpu_model or 'GPUs'} (request #{request.pk} by "
        f"{request.requester}) ends on {grant.ends_at:%Y-%m-%d %H:%M} UTC.\n\nTo keep the GPUs, the requester "
        f"asks to extend it on the request's page; the extension is decided like a new request.\n\n"
        f"This reminder was {grant.expiry_reminded_to}."
    )
    return tell(expiry_audience(grant), kind=Kind.GRANT, subject=subject, body=body, path=_path(request),
                 team_id=grant.team_id, base_url=base_url)


def admin_addresses() -> list[str]:
    return _addresses(portal_admins())


def double_ownership_opened(findings) -> int:
    """Two orchestrators may schedule on the same GPUs (jobs may collide on them): every admin hears of it at once."""
    if not findings:
        return 0
    nodes = ", ".join(f.node for f in findings)
    body = "\n\n".join(f"{f.node} ({f.orchestrators}):\n{f.explanation}" for f in findings)
    body += "\n\nThe finding closes by itself once only one orchestrator may schedule there."
    return tell(portal_admins(), kind=Kind.DRIFT, subject=f"Double ownership: {nodes}", body=body,
                 path=f"{reverse('ledger')}?kind=double_ownership", team_id=None)


def reclaim_plan_waiting(plan) -> int:
    """A reclaim plan waits for an administrator's approval: the admins hear of it, with the victims' teams."""
    body = f"Reclaim plan #{plan.pk} on {plan.orchestrator} waits for approval: {plan.cause or 'no cause given'}."
    return tell(portal_admins(), kind=Kind.RECLAIM, subject=f"Reclaim plan #{plan.pk} waits for approval",
                 body=body, path=reverse("reclaim"), team_id=None)


def drift_found(finding) -> int:
    """An object the portal applied was changed on the cluster by someone else: the admins decide."""
    body = (
        f"{finding.object_id} on {finding.orchestrator} differs from what the portal applied"
        f"{f' (team {finding.team})' if finding.team else ''}. Revert or adopt it on the governance page."
    )
    return tell(portal_admins(), kind=Kind.DRIFT, subject=f"Drift on {finding.orchestrator}: {finding.object_id}",
                 body=body, path=reverse("governance"), team_id=None)


def rebalance_plan_proposed(plan) -> int:
    body = f"{plan.reason}\n\nApprove or reject it on the plan's page."
    return tell(portal_admins(), kind=Kind.PLAN, subject=f"Rebalance plan #{plan.pk} waits for approval",
                 body=body, path=reverse("rebalance-plan", args=[plan.pk]), team_id=None)
