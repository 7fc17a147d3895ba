"""Email the people a quota decision concerns: deciders when a request arrives, the requester after."""

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.mail import send_mass_mail
from django.urls import reverse

from scheduling.models import Membership, QuotaRequest, Team
from scheduling.rules import portal_admins


def _link(request: QuotaRequest, base_url: str) -> str:
    return f"{base_url.rstrip('/')}{reverse('quota-detail', args=[request.pk])}"


def _send(subject: str, body: str, recipients: list[str]) -> int:
    """One mail to ``recipients``; a mail server that fails never fails the decision that caused it."""
    return send_mass_mail([(subject, body, settings.DEFAULT_FROM_EMAIL, recipients)], fail_silently=True)


def leads_above(team_id: int):
    """Active leads of the team and of every team above it: who decides for it and hears of its grants."""
    lineage = [team_id, *Team.objects.tree().ancestors(team_id)]
    return get_user_model().objects.filter(
        memberships__team_id__in=lineage, memberships__role=Membership.Role.LEAD, is_active=True
    ).distinct()


def deciders_of(request: QuotaRequest) -> list[str]:
    """Addresses of the leads of the request's team and the teams above it, or of the admins if none
    of those leads has an address; never the requester."""
    emails = _addresses(leads_above(request.team_id).exclude(pk=request.requester_id))
    if not emails:
        emails = _addresses(portal_admins().exclude(pk=request.requester_id))
    return emails


def decider_names(request: QuotaRequest) -> list[str]:
    """Who decides ``request``, by username, as a page tells the requester: the leads of its team and the teams
    above it, else the portal admins (the same people deciders_of mails, also those without an address)."""
    leads = leads_above(request.team_id).exclude(pk=request.requester_id)
    people = leads if leads.exists() else portal_admins().exclude(pk=request.requester_id)
    return sorted(people.values_list("username", flat=True))


def _addresses(users) -> list[str]:
    return sorted(set(users.exclude(email="").values_list("email", flat=True)))


def _extension_note(request: QuotaRequest) -> str:
    if request.extends_id is None:
        return ""
    return f"It extends request #{request.extends_id}, whose grant ends at this request's start.\n\n"


def request_submitted(request: QuotaRequest, *, base_url: str) -> int:
    recipients = deciders_of(request)
    if not recipients:
        return 0
    subject = (
        f"[gpuportal] Quota request #{request.pk}: {request.gpus} {request.gpu_model or 'GPUs'} for {request.team}"
    )
    body = (
        f"{request.requester} asks for {request.gpus} {request.gpu_model or 'GPUs of any model'} for team "
        f"{request.team} from {request.starts_at:%Y-%m-%d %H:%M} to {request.ends_at:%Y-%m-%d %H:%M} (UTC).\n\n"
        f"{_extension_note(request)}Justification:\n{request.justification}\n\n"
        f"Approve or deny: {_link(request, base_url)}\n"
    )
    return _send(subject, body, recipients)


def request_amended(request: QuotaRequest, *, base_url: str) -> int:
    recipients = deciders_of(request)
    if not recipients:
        return 0
    change = request.history.order_by("-history_date").values_list("history_change_reason", flat=True).first()
    subject = f"[gpuportal] Quota request #{request.pk} amended by {request.requester}"
    body = (
        f"{request.requester} amended request #{request.pk} for team {request.team}, still awaiting a decision: "
        f"{change}.\n\nIt now asks for {request.gpus} {request.gpu_model or 'GPUs of any model'} from "
        f"{request.starts_at:%Y-%m-%d %H:%M} to {request.ends_at:%Y-%m-%d %H:%M} (UTC).\n\n"
        f"Approve or deny: {_link(request, base_url)}\n"
    )
    return _send(subject, body, recipients)


def who_hears_of_amendment(request: QuotaRequest) -> str:
    """What to tell the requester about the mail ``request_amended`` sends: to whom, or that nobody gets one."""
    recipients = deciders_of(request)
    if recipients:
        return f"an email goes to {', '.join(recipients)}"
    return "no decider has an email address, so nobody was emailed: they see the change on the request's page"


def who_hears_of_decision(request: QuotaRequest) -> str:
    """What to tell the decider about the mail ``request_decided`` sends: to whom, or that nobody gets one."""
    requester = request.requester
    if requester.email:
        return f"an email goes to {requester} at {requester.email}"
    return f"{requester} has no email address, so nobody was emailed: they see the decision on the request's page"


def request_decided(request: QuotaRequest, *, base_url: str) -> int:
    address = request.requester.email
    if not address:
        return 0
    verb = request.get_state_display().lower()
    subject = f"[gpuportal] Quota request #{request.pk} {verb}"
    body = (
        f"Your request for {request.gpus} {request.gpu_model or 'GPUs'} for {request.team} was {verb} by "
        f"{request.decided_by}.\n\nComment: {request.decision_comment or '(none)'}\n\n{_link(request, base_url)}\n"
    )
    return _send(subject, body, [address])


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
    return told + (f"; no email address for {', '.join(missed)}" if missed else "")


def grant_expiring(grant, *, base_url: str) -> int:
    recipients = sorted({person.email for person in expiry_audience(grant) if person.email})
    if not recipients:
        return 0
    request = grant.request
    subject = f"[gpuportal] Grant of request #{request.pk} ends {grant.ends_at:%Y-%m-%d %H:%M} UTC"
    body = (
        f"Team {grant.team}'s grant of {grant.gpus} {grant.gpu_model or 'GPUs'} (request #{request.pk} by "
        f"{request.requester}) ends on {grant.ends_at:%Y-%m-%d %H:%M} UTC.\n\nTo keep the GPUs, the requester "
        f"asks to extend it on the request's page; the extension is decided like a new request: "
        f"{_link(request, base_url)}\n\n"
        f"This reminder was {grant.expiry_reminded_to}.\n"
    )
    return _send(subject, body, recipients)


def admin_addresses() -> list[str]:
    return _addresses(portal_admins())


def double_ownership_opened(findings) -> int:
    """Two orchestrators may schedule on the same GPUs (jobs may collide on them): every admin hears of it at once."""
    recipients = admin_addresses()
    if not recipients or not findings:
        return 0
    nodes = ", ".join(f.node for f in findings)
    link = f"{settings.GPUPORTAL_BASE_URL.rstrip('/')}{reverse('ledger')}?kind=double_ownership"
    subject = f"[gpuportal] Double ownership: {nodes}"
    body = "\n\n".join(f"{f.node} ({f.orchestrators}):\n{f.explanation}" for f in findings)
    body += f"\n\nThe ledger: {link}\nThe finding closes by itself once only one orchestrator may schedule there.\n"
    return _send(subject, body, recipients)
