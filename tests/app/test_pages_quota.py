"""Quota requests through the pages: feasibility first, then send, decide, notify, see the decision."""

from html import unescape

import pytest
from django.core import mail
from django.urls import reverse

from scheduling.models import QuotaGrant, QuotaRequest

pytestmark = pytest.mark.django_db


@pytest.fixture
def people(cast):
    for role, user in cast.items():
        user.email = f"{role}@example.org"
        user.save()
    return cast


def _form(teams, period, **overrides):
    start, end = period
    data = {
        "team": teams["nlp"].pk,
        "gpus": 8,
        "gpu_model": "H100",
        "orchestrator": "",
        "starts_at": start.strftime("%Y-%m-%dT%H:%M"),
        "ends_at": end.strftime("%Y-%m-%dT%H:%M"),
        "justification": "ICML deadline",
        "action": "check",
    }
    data.update(overrides)
    return data


def test_checking_a_request_shows_its_feasibility_and_sends_nothing(client, people, teams, queues, period):
    client.force_login(people["researcher"])
    body = unescape(client.post(reverse("quota-new"), _form(teams, period)).content.decode())
    assert "Fits inside research's 40 %" in body
    assert "Fits the unpromised H100 capacity" in body
    assert "Send request" in body
    assert not QuotaRequest.objects.exists() and not mail.outbox


def test_a_request_beyond_free_capacity_says_by_how_much(client, people, teams, queues, period):
    client.force_login(people["researcher"])
    body = unescape(client.post(reverse("quota-new"), _form(teams, period, gpus=30, gpu_model="")).content.decode())
    # 64 GPUs, 40 guaranteed to top-level teams: 24 unpromised, so 30 exceeds it by 6.
    assert "Exceeds free fleet capacity from" in body and "by 6 GPUs" in body


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"gpus": 0}, "GPUs must be a whole number of at least 1."),
        ({"justification": ""}, "Justification: A justification is required"),
        ({"ends_at": "2020-01-01T00:00"}, "End (UTC): The end must be after the start."),
        ({"starts_at": "0001-01-01T00:00"}, "Start (UTC): The start may be at most 7 days in the past."),
        ({"ends_at": "9999-12-31T23:59"}, "End (UTC): A period may last at most 366 days; this one lasts"),
    ],
)
def test_form_errors_name_the_field_and_the_rule(client, people, teams, queues, period, overrides, message):
    client.force_login(people["researcher"])
    body = unescape(client.post(reverse("quota-new"), _form(teams, period, **overrides)).content.decode())
    assert message in body


def test_a_researcher_cannot_request_for_a_team_they_are_not_in(client, people, teams, queues, period):
    client.force_login(people["researcher"])
    data = _form(teams, period, team=teams["production"].pk)
    body = unescape(client.post(reverse("quota-new"), data).content.decode())
    assert "Select a valid choice" in body and not QuotaRequest.objects.exists()


def test_sending_a_request_mails_the_leads_and_a_lead_approves_it(
    client, people, teams, queues, period, django_capture_on_commit_callbacks
):
    client.force_login(people["researcher"])
    with django_capture_on_commit_callbacks(execute=True):  # the mail leaves once the request is committed
        response = client.post(reverse("quota-new"), _form(teams, period, action="submit"))
    request = QuotaRequest.objects.get()
    assert response.status_code == 302 and response["Location"] == reverse("quota-detail", args=[request.pk])
    assert request.state == QuotaRequest.State.SUBMITTED
    assert len(mail.outbox) == 1
    assert sorted(mail.outbox[0].to) == ["lead@example.org", "nlp_lead@example.org"]
    assert f"/quota/{request.pk}/" in mail.outbox[0].body

    client.force_login(people["lead"])
    page = unescape(client.get(reverse("quota-detail", args=[request.pk])).content.decode())
    assert 'id="approve"' in page and "Fits inside research's 40 %" in page
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(reverse("quota-detail", args=[request.pk]), {"decision": "approve", "comment": "go"})
    assert response.status_code == 302
    request.refresh_from_db()
    assert request.state == QuotaRequest.State.APPROVED and request.decided_by == people["lead"]
    assert QuotaGrant.objects.get().gpus == 8
    assert mail.outbox[-1].to == ["researcher@example.org"] and "approved" in mail.outbox[-1].subject

    client.force_login(people["researcher"])
    page = unescape(client.get(reverse("quota-detail", args=[request.pk])).content.decode())
    assert "Approved by leo" in page and "go" in page and 'id="approve"' not in page


def test_a_lead_who_left_is_not_mailed_a_request_to_decide(
    client, people, teams, queues, period, django_capture_on_commit_callbacks
):
    people["nlp_lead"].is_active = False
    people["nlp_lead"].save(update_fields=["is_active"])
    client.force_login(people["researcher"])
    with django_capture_on_commit_callbacks(execute=True):
        client.post(reverse("quota-new"), _form(teams, period, action="submit"))
    assert [message.to for message in mail.outbox] == [["lead@example.org"]]


def test_denying_needs_a_comment(client, people, teams, queues, period, django_capture_on_commit_callbacks):
    client.force_login(people["researcher"])
    client.post(reverse("quota-new"), _form(teams, period, action="submit"))
    request = QuotaRequest.objects.get()
    client.force_login(people["lead"])
    body = unescape(
        client.post(reverse("quota-detail", args=[request.pk]), {"decision": "deny", "comment": ""}).content.decode()
    )
    assert "Comment: Say why" in body
    with django_capture_on_commit_callbacks(execute=True):
        client.post(reverse("quota-detail", args=[request.pk]), {"decision": "deny", "comment": "use the spot pool"})
    request.refresh_from_db()
    assert request.state == QuotaRequest.State.DENIED and "denied" in mail.outbox[-1].subject


def test_the_requester_cannot_decide_their_own_request(client, people, teams, queues, period):
    client.force_login(people["researcher"])
    client.post(reverse("quota-new"), _form(teams, period, action="submit"))
    request = QuotaRequest.objects.get()
    page = unescape(client.get(reverse("quota-detail", args=[request.pk])).content.decode())
    assert 'id="approve"' not in page
    response = client.post(reverse("quota-detail", args=[request.pk]), {"decision": "approve", "comment": ""})
    assert response.status_code == 403
    request.refresh_from_db()
    assert request.state == QuotaRequest.State.SUBMITTED


def test_approving_beyond_capacity_shows_the_services_reason(client, people, teams, queues, period):
    client.force_login(people["researcher"])
    client.post(reverse("quota-new"), _form(teams, period, gpus=30, gpu_model="", action="submit"))
    request = QuotaRequest.objects.get()
    client.force_login(people["admin"])
    body = unescape(client.post(reverse("quota-detail", args=[request.pk]), {"decision": "approve"}).content.decode())
    assert "30 GPUs exceed the unpromised fleet capacity of 24 GPUs" in body
    request.refresh_from_db()
    assert request.state == QuotaRequest.State.SUBMITTED


def test_a_lead_revokes_a_grant_with_a_reason(client, people, teams, queues, period):
    client.force_login(people["researcher"])
    client.post(reverse("quota-new"), _form(teams, period, action="submit"))
    request = QuotaRequest.objects.get()
    client.force_login(people["lead"])
    client.post(reverse("quota-detail", args=[request.pk]), {"decision": "approve", "comment": "ok"})
    assert 'id="revoke"' in client.get(reverse("quota-detail", args=[request.pk])).content.decode()
    client.post(reverse("quota-detail", args=[request.pk]), {"decision": "revoke", "comment": "project cancelled"})
    request.refresh_from_db()
    assert request.state == QuotaRequest.State.REVOKED


@pytest.mark.parametrize("email", ["researcher@example.org", ""])
def test_the_decider_is_told_exactly_who_gets_an_email_or_that_nobody_does(
    client, people, teams, queues, period, email, django_capture_on_commit_callbacks
):
    type(people["researcher"]).objects.filter(pk=people["researcher"].pk).update(email=email)
    client.force_login(people["researcher"])
    client.post(reverse("quota-new"), _form(teams, period, action="submit"))
    request = QuotaRequest.objects.get()
    client.force_login(people["lead"])
    mail.outbox.clear()
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(
            reverse("quota-detail", args=[request.pk]), {"decision": "approve", "comment": "go"}, follow=True
        )
    said = " ".join(str(m) for m in response.context["messages"])
    if email:
        assert f"an email goes to {people['researcher'].username} at {email}" in said and len(mail.outbox) == 1
    else:
        assert "has no email address, so nobody was emailed" in said and mail.outbox == []
    assert "was notified" not in said


def test_a_subscriber_without_an_email_address_is_told_nothing_is_sent(client, people):
    type(people["researcher"]).objects.filter(pk=people["researcher"].pk).update(email="")
    client.force_login(people["researcher"])
    client.post(reverse("report-subscription"), {"action": "subscribe", "format": "link"})
    body = unescape(client.get(reverse("report-list")).content.decode())
    assert "no email address, so nothing is sent" in body and "You are subscribed (" in body


def test_an_approved_request_shows_what_is_enforced_on_the_clusters(
    client, people, teams, queues, period, django_capture_on_commit_callbacks
):
    client.force_login(people["researcher"])
    client.post(reverse("quota-new"), _form(teams, period, action="submit"))
    request = QuotaRequest.objects.get()
    assert 'id="enforcement"' not in client.get(reverse("quota-detail", args=[request.pk])).content.decode()
    client.force_login(people["lead"])
    with django_capture_on_commit_callbacks(execute=True):
        client.post(reverse("quota-detail", args=[request.pk]), {"decision": "approve", "comment": "go"})
    page = client.get(reverse("quota-detail", args=[request.pk])).content.decode()
    assert 'id="enforcement"' in page and "Enforced on the clusters" in page


def test_the_requester_withdraws_a_submitted_request_and_it_stays_in_the_history(client, people, teams, queues, period):
    client.force_login(people["researcher"])
    client.post(reverse("quota-new"), _form(teams, period, action="submit"))
    request = QuotaRequest.objects.get()
    page = client.get(reverse("quota-detail", args=[request.pk])).content.decode()
    assert 'id="withdraw"' in page
    client.force_login(people["lead"])  # a lead decides; only the requester withdraws
    assert 'id="withdraw"' not in client.get(reverse("quota-detail", args=[request.pk])).content.decode()
    response = client.post(reverse("quota-detail", args=[request.pk]), {"action": "withdraw"})
    assert response.status_code == 403
    client.force_login(people["researcher"])
    response = client.post(
        reverse("quota-detail", args=[request.pk]), {"action": "withdraw", "comment": "moved to spot"}, follow=True
    )
    request.refresh_from_db()
    assert request.state == QuotaRequest.State.WITHDRAWN
    body = unescape(response.content.decode())
    assert "withdrawn: nobody will decide it now" in body and "Withdrawn by rita: moved to spot" in body
    again = client.post(reverse("quota-detail", args=[request.pk]), {"action": "withdraw"}, follow=True)
    assert "Not withdrawn: a withdrawn request cannot become withdrawn." in unescape(again.content.decode())


def test_a_user_of_a_single_team_finds_it_chosen_on_the_request_form(client, cast, teams):
    client.force_login(cast["outsider"])  # a researcher in production only
    body = client.get(reverse("quota-new")).content.decode()
    assert f'<option value="{teams["production"].pk}" selected>' in body


def test_the_fair_share_line_of_the_check_adds_up_as_written(client, people, teams, queues, period):
    """Each number on the check explains itself: the share is of the whole fleet and the sum is shown."""
    import re

    client.force_login(people["researcher"])
    body = unescape(client.post(reverse("quota-new"), _form(teams, period, gpus=8)).content.decode())
    line = re.search(r"(Fits inside|Goes beyond) research's (\d+) % of the fleet's (\d+) GPUs \((\d+)\)[^<]*", body)
    assert line, body
    weight, fleet, share = (int(g) for g in line.groups()[1:])
    assert share == round(weight / 100 * fleet)
    guaranteed, granted, requested, total = (
        int(n)
        for n in re.search(r"(\d+) guaranteed \+ (\d+) granted [^+]*\+ (\d+) requested = (\d+)", line[0]).groups()
    )
    assert guaranteed + granted + requested == total and requested == 8
