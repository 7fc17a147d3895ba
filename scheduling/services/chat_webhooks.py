"""Chat webhooks: an admin sets one incoming-webhook URL for the site or for a team (audited), and every event
the portal tells people of is also posted there, by a Celery task with a timeout and retries.

A webhook that fails never blocks what caused the message: posting happens after the commit, in the worker,
and the failure is stored on the webhook (``last_error``) for the admin's page. The URL is a secret (Slack's
and Teams' carry their token in the path): errors are redacted of it before they are stored or logged.

The message task is named, not imported: tasks sit above services (import-linter's layers)."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from html import escape

import httpx
from celery import current_app
from django.conf import settings
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from scheduling.models import ChatWebhook, Team
from scheduling.redact import redact
from scheduling.rules import is_portal_admin

from .audit import require_reason, stamp_author

log = logging.getLogger(__name__)
TASK = "scheduling.tasks.post_chat_message"
ERROR_CHARS = 500


@dataclass(frozen=True)
class Message:
    subject: str
    body: str
    link: str  # absolute URL of what the message is about, or ""

    def as_task_kwargs(self) -> dict[str, str]:
        return {"subject": self.subject, "body": self.body, "link": self.link}


class DeliveryFailed(Exception):
    """The chat service did not take the message (network error, timeout or a non-2xx answer)."""


# ------------------------------------------------------------------------------------------- formats


def payload(fmt: str, message: Message) -> dict:
    """The JSON body each chat's incoming webhook takes."""
    return {ChatWebhook.Format.SLACK: _slack, ChatWebhook.Format.MATRIX: _matrix, ChatWebhook.Format.TEAMS: _teams}[
        ChatWebhook.Format(fmt)
    ](message)


def _slack(message: Message) -> dict:
    # Slack's mrkdwn: &, < and > must be escaped; <url|text> is a link.
    def mrkdwn(text: str) -> str:
        return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")

    title = f"<{message.link}|{mrkdwn(message.subject)}>" if message.link else f"*{mrkdwn(message.subject)}*"
    return {"text": f"{title}\n{mrkdwn(message.body)}".rstrip()}


def _matrix(message: Message) -> dict:
    # matrix-hookshot's generic webhook: plain ``text`` and optional ``html``.
    plain = f"{message.subject}\n{message.body}\n{message.link}".strip()
    title = escape(message.subject)
    if message.link:
        title = f'<a href="{escape(message.link)}">{title}</a>'
    html = f"<strong>{title}</strong><br>{escape(message.body).replace(chr(10), '<br>')}"
    return {"text": plain, "html": html}


def _teams(message: Message) -> dict:
    # A Teams workflow ("When a Teams webhook request is received") takes an Adaptive Card in a message.
    card: dict = {
        "type": "AdaptiveCard",
        "version": "1.4",
        "body": [
            {"type": "TextBlock", "text": message.subject, "weight": "Bolder", "wrap": True},
            {"type": "TextBlock", "text": message.body, "wrap": True},
        ],
    }
    if message.link:
        card["actions"] = [{"type": "Action.OpenUrl", "title": "Open in gpuportal", "url": message.link}]
    return {
        "type": "message",
        "attachments": [{"contentType": "application/vnd.microsoft.card.adaptive", "content": card}],
    }


# ------------------------------------------------------------------------------------------- configuring


def _require_admin(by) -> None:
    if not (by and is_portal_admin(by)):
        raise PermissionDenied("Only administrators set chat webhooks.")


@transaction.atomic
def configure(*, team: Team | None, url: str, fmt: str, enabled: bool, by, reason: str) -> ChatWebhook:
    """Create or change the webhook of ``team`` (None: the site), audited with who and why."""
    _require_admin(by)
    reason = require_reason(reason)
    # Ordered by pk: the default order joins Team, and FOR UPDATE refuses the nullable side of an outer join.
    webhook = ChatWebhook.objects.select_for_update().filter(team=team).order_by("pk").first() or ChatWebhook(team=team)
    webhook.url, webhook.format, webhook.enabled = url.strip(), fmt, enabled
    if not webhook.url.lower().startswith(("https://", "http://")):
        raise ValidationError({"url": "the webhook URL must start with https:// (or http:// inside the site)."})
    webhook.full_clean()
    webhook.last_error, webhook.last_error_at = "", None  # a new URL starts with a clean record
    stamp_author(webhook, by=by, reason=reason)
    webhook.save()
    return webhook


@transaction.atomic
def remove(webhook_id: int, *, by, reason: str) -> None:
    _require_admin(by)
    webhook = ChatWebhook.objects.select_for_update().get(pk=webhook_id)
    stamp_author(webhook, by=by, reason=require_reason(reason))
    webhook.delete()


# ------------------------------------------------------------------------------------------- sending


def webhooks_for(team_id: int | None) -> list[ChatWebhook]:
    """The enabled webhooks a message about ``team_id`` goes to: the site's and the team's own."""
    scope = Q(team__isnull=True) | (Q(team_id=team_id) if team_id is not None else Q(pk__in=[]))
    return list(ChatWebhook.objects.filter(scope, enabled=True).order_by("pk"))


def enqueue(team_id: int | None, message: Message) -> int:
    """Queue the message for each webhook once the current transaction commits; a broker that is down is
    logged and nothing else (the inbox row and the mail are the record)."""
    webhooks = [webhook.pk for webhook in webhooks_for(team_id)]
    if webhooks:
        transaction.on_commit(lambda: _publish(webhooks, message))
    return len(webhooks)


def _publish(webhook_ids: list[int], message: Message) -> None:
    for webhook_id in webhook_ids:
        try:
            current_app.signature(TASK, args=[webhook_id], kwargs=message.as_task_kwargs()).apply_async()
        except Exception:
            log.warning("could not queue the chat message for webhook %s", webhook_id, exc_info=True)


def send_test(webhook_id: int, *, by) -> ChatWebhook:
    """Queue a test message to one webhook (its outcome shows on the admin's page like any other)."""
    _require_admin(by)
    webhook = ChatWebhook.objects.get(pk=webhook_id)
    link = f"{settings.GPUPORTAL_BASE_URL.rstrip('/')}/notifications/webhooks/"
    message = Message(subject="gpuportal test message", body=f"{by} checked the {webhook}.", link=link)
    transaction.on_commit(lambda: _publish([webhook.pk], message))
    return webhook


def post(webhook_id: int, message: Message, *, attempt: int = 1, attempts: int = 1) -> bool:
    """Send one message; records success or the error (redacted of the URL) on the webhook.
    Returns False when the webhook is gone or disabled; raises DeliveryFailed when the chat refused it."""
    webhook = ChatWebhook.objects.filter(pk=webhook_id, enabled=True).first()
    if webhook is None:
        return False
    try:
        response = httpx.post(
            webhook.url, json=payload(webhook.format, message), timeout=settings.GPUPORTAL_CHAT_WEBHOOK_TIMEOUT_S
        )
        response.raise_for_status()
    except httpx.HTTPError as error:
        said = _describe(error)
        text = redact(f"attempt {attempt} of {attempts}: {said}", [webhook.url])[:ERROR_CHARS]
        ChatWebhook.objects.filter(pk=webhook.pk).update(last_error=text, last_error_at=timezone.now())
        raise DeliveryFailed(text) from error
    ChatWebhook.objects.filter(pk=webhook.pk).update(last_sent_at=timezone.now(), last_error="", last_error_at=None)
    return True


def _describe(error: httpx.HTTPError) -> str:
    if isinstance(error, httpx.HTTPStatusError):
        return f"HTTP {error.response.status_code} {error.response.text[:200]}".strip()
    if isinstance(error, httpx.TimeoutException):
        return f"no answer within {settings.GPUPORTAL_CHAT_WEBHOOK_TIMEOUT_S} s ({type(error).__name__})"
    return f"{type(error).__name__}: {error}"
