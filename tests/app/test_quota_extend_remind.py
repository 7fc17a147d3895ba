"""A grant's end: a reminder once per grant to the requester and the team's leads, and an extension that is
decided and promise-checked like a new request."""

from datetime import timedelta
from html import unescape

import pytest
from django.core import mail
from django.core.exceptions import PermissionDenied, ValidationError
from django.urls import reverse

from scheduling.models import QuotaGrant, QuotaRequest
from scheduling.services import quota
from scheduling.tasks import remind_expiring_grants

pytestmark = pytest.mark.django_db


@pytest.fixture
def granted(cast, teams, queues, period):
    cast["researcher"].email = "rita@example.org"
    cast["researcher"].save()
    cast["nlp_lead"].email = "nina@example.org"
    cast["nlp_lead"].save()  # leo, research's lead, has no address
    start, end = period
    request = quota.create_request(
        requester=cast["researcher"], team=teams["nlp"], gpus=8, starts_at=start, ends_at=end, justification="ICML"
    )
    quota.approve_request(request.pk, by=cast["nlp_lead"], comment="go")
    request.refresh_from_db()
    return request


def test_a_grant_ending_within_the_lead_time_is_reminded_once_and_says_who_was_told(
    granted, settings, django_capture_on_commit_callbacks
):
    settings.GPUPORTAL_GRANT_REMINDER_DAYS = 7
    grant = granted.grant
    assert quota.remind_expiring_grants(now=grant.ends_at - timedelta(days=8)) == 0  # not yet within 7 days
    mail.outbox.clear()
    with django_capture_on_commit_callbacks(execute=True):
        assert quota.remind_expiring_grants(now=grant.ends_at - timedelta(days=6)) == 1
    grant.refresh_from_db()
    told = (
        "sent to rita at rita@example.org, nina at nina@example.org; no email address for leo (their portal inbox "
        "has it)"
    )
    assert grant.expiry_reminded_to == told
    assert [sorted(m.to) for m in mail.outbox] == [["nina@example.org", "rita@example.org"]]
    assert f"This reminder was {told}." in mail.outbox[0].body and "extend" in mail.outbox[0].body
    with django_capture_on_commit_callbacks(execute=True):
        assert quota.remind_expiring_grants(now=grant.ends_at - timedelta(days=5)) == 0
    assert len(mail.outbox) == 1  # once per grant
    assert grant.history.filter(history_change_reason=f"reminder of the end: {told}").exists()


def test_the_beat_task_reminds_by_the_real_clock(granted, settings):
    settings.GPUPORTAL_GRANT_REMINDER_DAYS = 30  # the fixture's grant ends in 8 days
    assert settings.CELERY_BEAT_SCHEDULE["remind-expiring-grants"]["task"] == remind_expiring_grants.name
    assert remind_expiring_grants.apply().get() == 1
    assert remind_expiring_grants.apply().get() == 0


def test_an_extension_is_a_new_request_from_the_grant_end_decided_like_any(cast, granted):
    grant = granted.grant
    with pytest.raises(PermissionDenied):
        quota.extend_grant(
            granted.pk, by=cast["nlp_lead"], ends_at=grant.ends_at + timedelta(days=3), justification="x"
        )
    with pytest.raises(ValidationError) as early:
        quota.extend_grant(granted.pk, by=cast["researcher"], ends_at=grant.ends_at, justification="x")
    assert "the new end must be after the grant's end" in early.value.message_dict["ends_at"][0]
    extension = quota.extend_grant(
        granted.pk, by=cast["researcher"], ends_at=grant.ends_at + timedelta(days=3), justification="one more run"
    )
    assert (extension.extends, extension.state, extension.gpus) == (granted, QuotaRequest.State.SUBMITTED, 8)
    assert (extension.starts_at, extension.team) == (grant.ends_at, granted.team)
    with pytest.raises(ValidationError) as twice:
        quota.extend_grant(
            granted.pk, by=cast["researcher"], ends_at=grant.ends_at + timedelta(days=4), justification="x"
        )
    assert "already awaits a decision" in twice.value.message_dict["ends_at"][0]
    with pytest.raises(PermissionDenied):
        quota.approve_request(extension.pk, by=cast["researcher"])  # the same deciders as any request
    second = quota.approve_request(extension.pk, by=cast["nlp_lead"])
    assert (second.starts_at, second.ends_at) == (grant.ends_at, grant.ends_at + timedelta(days=3))


def test_an_extension_past_the_unpromised_capacity_is_refused_at_approval(cast, teams, granted):
    grant = granted.grant
    other = quota.create_request(
        requester=cast["outsider"], team=teams["production"], gpus=20,
        starts_at=grant.ends_at, ends_at=grant.ends_at + timedelta(days=5), justification="launch",
    )  # fmt: skip
    quota.approve_request(other.pk, by=cast["admin"])  # 64 GPUs - 40 guaranteed - 20 granted leaves 4
    extension = quota.extend_grant(
        granted.pk, by=cast["researcher"], ends_at=grant.ends_at + timedelta(days=3), justification="more"
    )
    with pytest.raises(ValidationError) as refused:
        quota.approve_request(extension.pk, by=cast["nlp_lead"])
    assert "unpromised fleet capacity of 4 GPUs" in refused.value.message_dict["gpus"][0]
    assert QuotaGrant.objects.filter(request=extension).count() == 0


def test_the_page_offers_the_requester_an_extension_and_links_both_ways(client, cast, granted):
    url = reverse("quota-detail", args=[granted.pk])
    client.force_login(cast["nlp_lead"])
    assert 'id="extend"' not in client.get(url).content.decode()
    client.force_login(cast["researcher"])
    assert 'id="extend"' in client.get(url).content.decode()
    bad = unescape(
        client.post(url, {"action": "extend", "extend-ends_at": "", "extend-justification": ""}).content.decode()
    )
    assert "New end (UTC): This field is required." in bad and "say why the GPUs are needed longer" in bad
    new_end = (granted.grant.ends_at + timedelta(days=2)).strftime("%Y-%m-%dT%H:%M")
    response = client.post(
        url, {"action": "extend", "extend-ends_at": new_end, "extend-justification": "ablation"}, follow=True
    )
    extension = QuotaRequest.objects.get(extends=granted)
    body = unescape(response.content.decode())
    assert f"Extension requested as #{extension.pk}" in body and f"request #{granted.pk}</a>" in body
    assert f"#{extension.pk}</a> to " in unescape(client.get(url).content.decode())
