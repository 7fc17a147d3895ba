"""Chat webhooks (issue 33 item 13): an admin sets one per site or team (audited); every message is posted by
a Celery task to a real HTTP server here, in Slack, Matrix (hookshot) and Teams (Adaptive Card) form; a failing
webhook is retried, recorded with its error for the admin, and never blocks the decision."""

from html import unescape

import pytest
from django.urls import reverse

from scheduling.models import ChatWebhook, QuotaRequest
from scheduling.services import chat_webhooks, quota
from tests.notify.conftest import submit

pytestmark = pytest.mark.django_db


def _decided(cast, teams, capture):
    request = submit(cast, teams, capture, justification="ICML <deadline> & more")
    with capture(execute=True):
        quota.deny_request(request.pk, by=cast["lead"], comment="booked")
    return request


def _hook(cast, room, fmt, team=None, path="/hook/T000/B000/secret-token"):
    return chat_webhooks.configure(team=team, url=room.url(path), fmt=fmt, enabled=True, by=cast["admin"],
                                   reason="the ops room")


def test_slack_gets_mrkdwn_with_a_link_for_each_message(cast, teams, queues, room, eager,
                                                        django_capture_on_commit_callbacks):
    hook = _hook(cast, room, "slack")
    request = _decided(cast, teams, django_capture_on_commit_callbacks)
    texts = [body["text"] for body in room.received]
    assert len(texts) == 2  # the submission, then the denial
    link = f"http://127.0.0.1:8000/quota/{request.pk}/"
    assert texts[0].startswith(f"<{link}|Quota request #{request.pk}: 8 GPUs for NLP>")
    assert "ICML &lt;deadline&gt; &amp; more" in texts[0]  # Slack's escapes, so the text is not markup
    assert texts[1].startswith(f"<http://127.0.0.1:8000/quota/{request.pk}/|Quota request #{request.pk} denied>")
    hook.refresh_from_db()
    assert hook.last_sent_at is not None and hook.last_error == ""


def test_matrix_gets_text_and_escaped_html(cast, teams, queues, room, eager, django_capture_on_commit_callbacks):
    _hook(cast, room, "matrix")
    request = _decided(cast, teams, django_capture_on_commit_callbacks)
    first = room.received[0]
    assert set(first) == {"text", "html"}
    assert first["text"].startswith(f"Quota request #{request.pk}: 8 GPUs for NLP\n")
    assert f'<a href="http://127.0.0.1:8000/quota/{request.pk}/">' in first["html"]
    assert "ICML &lt;deadline&gt; &amp; more" in first["html"] and "<deadline>" not in first["html"]


def test_teams_gets_an_adaptive_card_with_an_open_action(cast, teams, queues, room, eager,
                                                         django_capture_on_commit_callbacks):
    _hook(cast, room, "teams")
    request = _decided(cast, teams, django_capture_on_commit_callbacks)
    denial = room.received[1]
    assert denial["type"] == "message"
    (attachment,) = denial["attachments"]
    assert attachment["contentType"] == "application/vnd.microsoft.card.adaptive"
    card = attachment["content"]
    assert card["type"] == "AdaptiveCard" and card["body"][0]["text"] == f"Quota request #{request.pk} denied"
    assert card["actions"] == [{"type": "Action.OpenUrl", "title": "Open in gpuportal",
                                "url": f"http://127.0.0.1:8000/quota/{request.pk}/"}]


def test_a_team_webhook_hears_only_its_teams_messages(cast, teams, queues, room, eager,
                                                      django_capture_on_commit_callbacks):
    _hook(cast, room, "slack", team=teams["production"], path="/production")
    _hook(cast, room, "slack", team=teams["nlp"], path="/nlp")
    _decided(cast, teams, django_capture_on_commit_callbacks)  # a request of nlp's
    assert room.paths == ["/nlp", "/nlp"]


def test_a_failing_webhook_is_retried_recorded_and_never_blocks_the_decision(
    cast, teams, queues, room, eager, settings, django_capture_on_commit_callbacks
):
    settings.GPUPORTAL_CHAT_WEBHOOK_RETRIES = 3
    hook = _hook(cast, room, "slack")
    room.answers = [500]
    request = _decided(cast, teams, django_capture_on_commit_callbacks)
    request.refresh_from_db()
    assert request.state == QuotaRequest.State.DENIED  # the decision stands
    assert len(room.received) == 2 * 4  # two messages, each tried once and retried three times
    hook.refresh_from_db()
    assert hook.last_error.startswith("attempt 4 of 4: HTTP 500 invalid_token") and hook.last_error_at is not None
    assert "secret-token" not in hook.last_error


def test_a_retry_that_succeeds_clears_the_error(cast, teams, queues, room, eager, django_capture_on_commit_callbacks):
    hook = _hook(cast, room, "matrix")
    room.answers = [503, 200]
    _decided(cast, teams, django_capture_on_commit_callbacks)
    hook.refresh_from_db()
    assert len(room.received) == 3 and hook.last_error == "" and hook.last_sent_at is not None


def test_a_webhook_that_does_not_answer_times_out(cast, room, settings):
    settings.GPUPORTAL_CHAT_WEBHOOK_TIMEOUT_S = 0.3
    hook = _hook(cast, room, "slack")
    room.delay_s = 1.0
    with pytest.raises(chat_webhooks.DeliveryFailed, match=r"no answer within 0\.3 s"):
        chat_webhooks.post(hook.pk, chat_webhooks.Message("s", "b", ""), attempt=1, attempts=1)
    hook.refresh_from_db()
    assert "no answer within 0.3 s" in hook.last_error


def test_an_unreachable_webhook_is_recorded_without_its_url(cast, room):
    hook = chat_webhooks.configure(team=None, url="http://127.0.0.1:9/hooks/xoxb-very-secret", fmt="slack",
                                   enabled=True, by=cast["admin"], reason="test")
    with pytest.raises(chat_webhooks.DeliveryFailed):
        chat_webhooks.post(hook.pk, chat_webhooks.Message("s", "b", ""))
    hook.refresh_from_db()
    assert "ConnectError" in hook.last_error and "xoxb-very-secret" not in hook.last_error


def test_only_admins_set_webhooks_and_every_change_is_audited(client, cast, teams, room):
    for role in ("researcher", "lead", "outsider"):
        client.force_login(cast[role])
        assert client.get(reverse("chat-webhooks")).status_code == 403
        data = {"action": "save", "team": "", "format": "slack", "url": room.url(), "enabled": "on", "reason": "x"}
        assert client.post(reverse("chat-webhooks"), data).status_code == 403
    assert not ChatWebhook.objects.exists()

    client.force_login(cast["admin"])
    data = {"action": "save", "team": "nlp", "format": "teams", "url": room.url(), "enabled": "on", "reason": ""}
    page = unescape(client.post(reverse("chat-webhooks"), data, follow=True).content.decode())
    assert "reason: A reason is required" in page and not ChatWebhook.objects.exists()
    data["reason"] = "nlp asked for its channel"
    client.post(reverse("chat-webhooks"), data)
    data.update(format="matrix", reason="they moved to Matrix")
    client.post(reverse("chat-webhooks"), data)
    hook = ChatWebhook.objects.get()
    assert (hook.team, hook.format) == (teams["nlp"], "matrix")
    history = list(hook.history.order_by("history_date").values_list("history_user__username", "history_change_reason",
                                                                     "format"))
    assert history == [("ada", "nlp asked for its channel", "teams"), ("ada", "they moved to Matrix", "matrix")]
    audit = unescape(client.get(reverse("audit-log") + "?kind=chat-webhook").content.decode())
    assert "they moved to Matrix" in audit

    client.post(reverse("chat-webhooks"), {"action": "delete", "webhook": hook.pk, "reason": "room closed"})
    assert not ChatWebhook.objects.exists()
    assert hook.history.latest("history_date").history_change_reason == "room closed"


def test_the_admin_page_shows_the_last_error(client, cast, room):
    hook = _hook(cast, room, "slack")
    room.answers = [404]
    with pytest.raises(chat_webhooks.DeliveryFailed):
        chat_webhooks.post(hook.pk, chat_webhooks.Message("s", "b", ""), attempt=2, attempts=4)
    client.force_login(cast["admin"])
    page = unescape(client.get(reverse("chat-webhooks")).content.decode())
    assert "failing" in page and "attempt 2 of 4: HTTP 404 invalid_token" in page
    assert f"http://127.0.0.1:{room.server.server_address[1]}/…" in page and "secret-token" not in page


def test_a_bad_url_or_format_names_the_field(cast):
    from django.core.exceptions import ValidationError

    with pytest.raises(ValidationError, match="url"):
        chat_webhooks.configure(team=None, url="ftp://x", fmt="slack", enabled=True, by=cast["admin"], reason="r")
    with pytest.raises(ValidationError, match="format"):
        chat_webhooks.configure(team=None, url="https://x.example/h", fmt="irc", enabled=True, by=cast["admin"],
                                reason="r")
