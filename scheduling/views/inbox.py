"""The in-portal inbox (issue 33 item 13) and the admins' chat-webhook settings.

A user reads and marks only their own messages: any other id answers 404 (nothing says it exists). The
webhook page is for portal admins (403 for anyone else); every change carries a reason and is audited."""

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_POST

from scheduling.models import ChatWebhook, Notification, Team
from scheduling.selectors import inbox as inbox_reads
from scheduling.services import chat_webhooks, inbox

from .common import BadQuery

PER_PAGE = 25


@login_required
def inbox_page(request: HttpRequest) -> HttpResponse:
    unread_only = request.GET.get("show") == "unread"
    pages = Paginator(inbox_reads.messages_of(request.user, unread_only=unread_only), PER_PAGE)
    asked = request.GET.get("page", "1")
    if not asked.isdigit() or not 1 <= int(asked) <= max(pages.num_pages, 1):
        raise BadQuery("page", f"must be a whole number from 1 to {max(pages.num_pages, 1)}", asked)
    context = {
        "page": pages.page(int(asked)), "unread_only": unread_only, "unread": inbox_reads.unread_count(request.user)
    }
    return render(request, "scheduling/inbox.html", context)


def _own_or_404(action, request: HttpRequest, pk: int) -> Notification:
    try:
        return action(request.user, pk)
    except Notification.DoesNotExist:
        raise Http404("No message matches the given query.") from None


@login_required
@require_POST
def inbox_mark(request: HttpRequest, pk: int) -> HttpResponse:
    """Mark one message read (``read=1``, the default) or unread (``read=0``); ``open=1`` then goes to what it
    is about."""
    unread = request.POST.get("read") == "0"
    notification = _own_or_404(inbox.mark_unread if unread else inbox.mark_read, request, pk)
    if request.POST.get("open") and notification.link and url_has_allowed_host_and_scheme(notification.link, None):
        return redirect(notification.link)
    return redirect(_back(request))


@login_required
@require_POST
def inbox_mark_all(request: HttpRequest) -> HttpResponse:
    count = inbox.mark_all_read(request.user)
    messages.success(request, f"Marked {count} message{'s' if count != 1 else ''} read.")
    return redirect(_back(request))


def _back(request: HttpRequest) -> str:
    back = request.POST.get("next", "")
    return back if back.startswith("/inbox/") and url_has_allowed_host_and_scheme(back, None) else "/inbox/"


def _require_admin(request: HttpRequest) -> None:
    if not request.user.has_perm("scheduling.edit_chat_webhooks"):
        raise PermissionDenied("Only portal admins set chat webhooks.")


@login_required
def chat_webhooks_page(request: HttpRequest) -> HttpResponse:
    _require_admin(request)
    if request.method == "POST":
        _change_webhook(request)
        return redirect("chat-webhooks")
    webhooks = list(ChatWebhook.objects.select_related("team").order_by("team__slug", "pk"))
    context = {
        "webhooks": webhooks,
        "teams": Team.objects.order_by("slug"),
        "formats": ChatWebhook.Format.choices,
        "timeout": settings.GPUPORTAL_CHAT_WEBHOOK_TIMEOUT_S,
        "history": ChatWebhook.history.select_related("history_user").order_by("-history_date", "-history_id")[:20],
    }
    return render(request, "scheduling/chat_webhooks.html", context)


def _change_webhook(request: HttpRequest) -> None:
    action, reason = request.POST.get("action", "save"), request.POST.get("reason", "")
    try:
        if action == "save":
            team = _team(request.POST.get("team", ""))
            webhook = chat_webhooks.configure(
                team=team, url=request.POST.get("url", ""), fmt=request.POST.get("format", ""),
                enabled=request.POST.get("enabled") == "on", by=request.user, reason=reason,
            )
            messages.success(request, f"Saved the {webhook}.")
        elif action == "delete":
            chat_webhooks.remove(_webhook_id(request), by=request.user, reason=reason)
            messages.success(request, "Removed the webhook.")
        elif action == "test":
            webhook = chat_webhooks.send_test(_webhook_id(request), by=request.user)
            messages.success(request, f"A test message is on its way to the {webhook}; its result shows below.")
        else:
            messages.error(request, "Choose save, test or delete.")
    except ValidationError as error:
        for field, problems in error.message_dict.items():
            messages.error(request, f"{field}: {' '.join(problems)}")
    except ChatWebhook.DoesNotExist:
        raise Http404("No webhook matches the given query.") from None


def _team(slug: str) -> Team | None:
    if not slug:
        return None
    team = Team.objects.filter(slug=slug).first()
    if team is None:
        raise ValidationError({"team": f"no team named {slug!r}; choose the site or a team from the list."})
    return team


def _webhook_id(request: HttpRequest) -> int:
    raw = request.POST.get("webhook", "")
    if not raw.isdigit():
        raise ValidationError({"webhook": "choose a webhook from the list."})
    return int(raw)
