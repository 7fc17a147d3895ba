"""The in-portal inbox (issue 33 item 13): every event that mails someone leaves a row in their inbox, mail or no
mail; only its recipient reads or marks it."""

from datetime import timedelta
from html import unescape

import pytest
from django.core import mail
from django.urls import reverse
from django.utils import timezone

from scheduling.models import Notification
from scheduling.rules import is_lead, leads_above
from scheduling.services import quota
from tests.notify.conftest import submit

pytestmark = pytest.mark.django_db


def _submitted(cast, teams, capture):
    return submit(cast, teams, capture)


def test_a_submitted_request_reaches_every_deciders_inbox_without_any_mail(
    cast, teams, queues, django_capture_on_commit_callbacks
):
    request = _submitted(cast, teams, django_capture_on_commit_callbacks)
    rows = Notification.objects.filter(link=reverse("quota-detail", args=[request.pk])).order_by("recipient__username")
    # nina leads nlp, leo leads research above it; rita asked and hears nothing of her own request.
    assert [row.recipient.username for row in rows] == ["leo", "nina"]
    assert all(row.kind == "quota" and row.read_at is None and "8 GPUs for NLP" in row.subject for row in rows)
    assert mail.outbox == []  # nobody has an address: the inbox is the only way they hear of it


def test_a_decision_reaches_the_requesters_inbox_linking_the_request(
    client, cast, teams, queues, django_capture_on_commit_callbacks
):
    request = _submitted(cast, teams, django_capture_on_commit_callbacks)
    with django_capture_on_commit_callbacks(execute=True):
        quota.deny_request(request.pk, by=cast["lead"], comment="the cluster is booked that week")
    row = Notification.objects.get(recipient=cast["researcher"])
    assert row.subject == f"Quota request #{request.pk} denied"
    assert "the cluster is booked that week" in row.body and row.link == reverse("quota-detail", args=[request.pk])

    client.force_login(cast["researcher"])
    page = unescape(client.get(reverse("overview")).content.decode())
    assert "Inbox, 1 unread" in page  # the navigation's count
    page = unescape(client.get(reverse("inbox")).content.decode())
    assert f'<a href="/quota/{request.pk}/">Quota request #{request.pk} denied</a>' in page


def test_mark_read_unread_and_all(client, cast, teams, queues, django_capture_on_commit_callbacks):
    request = _submitted(cast, teams, django_capture_on_commit_callbacks)
    with django_capture_on_commit_callbacks(execute=True):
        quota.deny_request(request.pk, by=cast["lead"], comment="no")
    first = Notification.objects.filter(recipient=cast["lead"]).order_by("pk").first()
    client.force_login(cast["lead"])
    response = client.post(reverse("inbox-mark", args=[first.pk]), {"read": "1", "open": "1"})
    assert response.status_code == 302 and response["Location"] == first.link  # opened: what it is about
    first.refresh_from_db()
    assert first.read_at is not None
    client.post(reverse("inbox-mark", args=[first.pk]), {"read": "0"})
    first.refresh_from_db()
    assert first.read_at is None
    Notification.objects.create(recipient=cast["lead"], kind="plan", subject="second")
    client.post(reverse("inbox-mark-all"))
    assert not Notification.objects.filter(recipient=cast["lead"], read_at__isnull=True).exists()
    assert "Inbox, 0 unread" in client.get(reverse("inbox")).content.decode()


@pytest.mark.parametrize("intruder", ["outsider", "nlp_lead", "admin"])
def test_a_message_is_visible_and_markable_only_by_its_recipient(client, cast, intruder):
    mine = Notification.objects.create(recipient=cast["researcher"], kind="quota", subject="rita's secret decision")
    client.force_login(cast[intruder])
    assert "rita&#x27;s secret decision" not in client.get(reverse("inbox")).content.decode()
    for url, data in ((reverse("inbox-mark", args=[mine.pk]), {"read": "1", "open": "1"}),
                      (reverse("inbox-mark", args=[mine.pk]), {"read": "0"})):
        assert client.post(url, data).status_code == 404
    client.post(reverse("inbox-mark-all"))
    mine.refresh_from_db()
    assert mine.read_at is None  # nobody else's "mark all" touched it


def test_the_inbox_needs_a_login_and_marking_needs_post(client, cast):
    mine = Notification.objects.create(recipient=cast["researcher"], kind="quota", subject="x")
    assert client.get(reverse("inbox")).status_code == 302
    assert client.post(reverse("inbox-mark", args=[mine.pk])).status_code == 302  # to the login page
    client.force_login(cast["researcher"])
    assert client.get(reverse("inbox-mark", args=[mine.pk])).status_code == 405
    assert client.get(reverse("inbox") + "?page=x").status_code == 400


def test_a_grant_reminder_reaches_requester_and_leads_inbox(cast, teams, queues, django_capture_on_commit_callbacks):
    request = _submitted(cast, teams, django_capture_on_commit_callbacks)
    with django_capture_on_commit_callbacks(execute=True):
        grant = quota.approve_request(request.pk, by=cast["lead"], comment="ok")
        grant.ends_at = timezone.now() + timedelta(days=2)
        grant.save()
        quota.remind_expiring_grants()
    reminded = Notification.objects.filter(kind="grant").order_by("recipient__username")
    assert [row.recipient.username for row in reminded] == ["leo", "nina", "rita"]
    assert "portal inbox" in reminded[0].body  # "no email address for ... (their portal inbox has it)"


def test_leads_of_a_team_or_above_is_one_rule(cast, teams):
    """Issue 34 item 4: who decides (rules.is_lead) and who is told (notifications) used two computations."""
    from scheduling.services import notifications

    assert notifications.leads_above is leads_above
    for team in teams.values():
        told = set(leads_above(team.pk).values_list("username", flat=True))
        deciding = {user.username for user in cast.values() if is_lead(user, team)}
        assert told == deciding
    assert set(leads_above(teams["nlp"].pk).values_list("username", flat=True)) == {"leo", "nina"}
