"""The inbox and the chat-webhook page in Chromium (issue 33 item 13): a lead denies alice's request; alice sees
the unread count in the navigation, opens the inbox, follows the message to the request, and marks all read;
another researcher and an outsider see none of it; the admin sets a webhook and sees it fail. At 1280 and 390 px
nothing scrolls sideways. Screenshots go to ``$GPUPORTAL_SHOTS`` when it is set."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone

from scheduling.models import Membership, Notification, Team
from scheduling.services import chat_webhooks, quota
from tests.browser import shot, sideways

pytestmark = pytest.mark.browser

ROLES = {"admin": None, "lead": ("research", "lead"), "alice": ("nlp", "researcher"), "bob": ("nlp", "researcher"),
         "otto": None}


@pytest.fixture
def told(transactional_db):
    research = Team.objects.create(slug="research", name="Research")
    nlp = Team.objects.create(slug="nlp", name="NLP research", parent=research)
    Team.objects.create(slug="vision", name="Vision")
    teams = {"research": research, "nlp": nlp}
    users = {}
    for name, membership in ROLES.items():
        users[name] = get_user_model().objects.create_user(
            name, password=name, is_staff=name == "admin", is_superuser=name == "admin"
        )
        if membership:
            Membership.objects.create(user=users[name], team=teams[membership[0]], role=membership[1])
    start = timezone.now() + timedelta(hours=2)
    request = quota.create_request(requester=users["alice"], team=nlp, gpus=8, starts_at=start,
                                   ends_at=start + timedelta(days=2), justification="ICML deadline, 2 days")
    quota.deny_request(request.pk, by=users["lead"], comment="the week is booked; ask for the week after")
    # A failing site webhook (nothing listens on port 9), as the worker leaves it after its retries.
    hook = chat_webhooks.configure(team=None, url="https://127.0.0.1:9/hooks/T0/B0/xoxb-secret", fmt="slack",
                                   enabled=True, by=users["admin"], reason="the ops room")
    with pytest.raises(chat_webhooks.DeliveryFailed):
        chat_webhooks.post(hook.pk, chat_webhooks.Message("test", "b", ""), attempt=4, attempts=4)
    return request


@pytest.mark.parametrize("width", [1280, 390])
def test_each_role_sees_only_its_own_inbox(session, told, width):
    for name in ROLES:
        person = session(width=width)
        person.log_in(name, name)
        page = person.page
        inbox_link = page.get_by_role("link", name="Inbox", exact=False).first
        expected_unread = Notification.objects.filter(recipient__username=name, read_at__isnull=True).count()
        assert inbox_link.get_attribute("aria-label") == f"Inbox, {expected_unread} unread"
        inbox_link.click()
        page.wait_for_url("**/inbox/")
        shot(page, f"inbox-{name}-{width}")
        assert sideways(page) <= 1, f"{name}: /inbox/ scrolls sideways by {sideways(page)}px at {width}"
        text = page.locator("main").inner_text()
        if name in ("bob", "otto"):
            assert "No message yet" in text and "denied" not in text
        if name == "alice":
            assert f"Quota request #{told.pk} denied" in text and "the week is booked" in text
            page.get_by_role("button", name="Open and mark read").click()
            page.wait_for_url(f"**/quota/{told.pk}/")
            assert page.get_by_role("link", name="Inbox", exact=False).first.get_attribute("aria-label") == (
                "Inbox, 0 unread"
            )
        if name == "lead":
            assert f"Quota request #{told.pk}: 8 GPUs for NLP research" in text
            page.get_by_role("button", name="Mark all read").click()
            page.wait_for_url("**/inbox/")
            assert "0 unread" in page.locator("main").inner_text()
        assert person.errors == []


@pytest.mark.parametrize("width", [1280, 390])
def test_the_admin_sees_the_failing_webhook_and_others_are_refused(session, told, width):
    admin = session(width=width)
    admin.log_in("admin", "admin")
    page = admin.go("/")
    page.locator("nav[aria-label=Main]").get_by_role("link", name="Chat webhooks").click()
    page.wait_for_url("**/notifications/webhooks/")
    shot(page, f"webhooks-admin-{width}")
    assert sideways(page) <= 1, f"/notifications/webhooks/ scrolls sideways by {sideways(page)}px at {width}"
    hooks = page.locator("#webhooks").inner_text()
    assert "failing" in hooks and "attempt 4 of 4: ConnectError" in hooks and "xoxb-secret" not in page.content()
    page.get_by_label("Scope").select_option("nlp")
    page.get_by_label("Format").select_option("teams")
    page.get_by_label("Incoming-webhook URL").fill("https://example.invalid/workflows/abc")
    page.get_by_label("Reason", exact=True).fill("nlp wants its Teams channel")
    page.get_by_role("button", name="Save webhook").click()
    page.wait_for_url("**/notifications/webhooks/")
    assert "Team NLP research · Microsoft Teams" in page.locator("#webhooks").inner_text()
    assert "nlp wants its Teams channel" in page.locator("#changes").inner_text()
    shot(page, f"webhooks-admin-saved-{width}")
    for name in ("lead", "alice", "otto"):
        person = session(width=width)
        person.log_in(name, name)
        assert person.page.locator("nav[aria-label=Main]").get_by_role("link", name="Chat webhooks").count() == 0
        response = person.page.goto(person.base_url + "/notifications/webhooks/")
        assert response is not None and response.status == 403
        shot(person.page, f"webhooks-{name}-{width}")
