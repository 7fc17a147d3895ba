"""The requester amends a submitted request: audited with what changed and why, deciders told and shown it."""

from datetime import timedelta
from html import unescape

import pytest
from django.core import mail
from django.core.exceptions import PermissionDenied, ValidationError
from django.urls import reverse
from django.utils import timezone

from scheduling.models import QuotaRequest, Workload
from scheduling.services import quota

pytestmark = pytest.mark.django_db


@pytest.fixture
def submitted(cast, teams, queues, period):
    for role, user in cast.items():
        user.email = f"{role}@example.org"
        user.save()
    start, end = period
    return quota.create_request(
        requester=cast["researcher"], team=teams["nlp"], gpus=8, starts_at=start, ends_at=end, justification="ICML"
    )


def _amend_form(request: QuotaRequest, **overrides) -> dict:
    data = {
        "action": "amend",
        "amend-gpus": request.gpus,
        "amend-starts_at": request.starts_at.strftime("%Y-%m-%dT%H:%M"),
        "amend-ends_at": request.ends_at.strftime("%Y-%m-%dT%H:%M"),
        "amend-justification": request.justification,
        "amend-reason": "the run needs more",
    }
    data.update(overrides)
    return data


def test_amending_records_what_changed_and_why_and_tells_the_deciders(cast, submitted):
    mail.outbox.clear()
    new_end = submitted.ends_at + timedelta(days=2)
    amended = quota.amend_request(
        submitted.pk, by=cast["researcher"], changes={"gpus": 16, "ends_at": new_end}, reason="bigger sweep"
    )
    assert (amended.gpus, amended.ends_at, amended.state) == (16, new_end, QuotaRequest.State.SUBMITTED)
    latest = submitted.history.order_by("-history_date").first()
    assert latest.history_user == cast["researcher"]
    assert latest.history_change_reason.startswith("amended (GPUs 8 → 16; end ")
    assert latest.history_change_reason.endswith("): bigger sweep")


def test_only_the_requester_amends_and_only_before_a_decision(cast, submitted):
    with pytest.raises(PermissionDenied):
        quota.amend_request(submitted.pk, by=cast["nlp_lead"], changes={"gpus": 4}, reason="x")
    quota.deny_request(submitted.pk, by=cast["nlp_lead"], comment="no room")
    with pytest.raises(ValidationError) as refused:
        quota.amend_request(submitted.pk, by=cast["researcher"], changes={"gpus": 4}, reason="x")
    assert refused.value.message_dict["state"] == ["a denied request cannot be amended: it is already decided."]


def test_an_amendment_obeys_the_request_rules_and_names_the_field(cast, submitted):
    with pytest.raises(ValidationError) as bad_end:
        quota.amend_request(
            submitted.pk, by=cast["researcher"], changes={"ends_at": submitted.starts_at}, reason="oops"
        )
    assert bad_end.value.message_dict["ends_at"] == ["The end must be after the start."]
    with pytest.raises(ValidationError) as nothing:
        quota.amend_request(submitted.pk, by=cast["researcher"], changes={"gpus": 8}, reason="same")
    assert "nothing to amend" in nothing.value.message_dict["gpus"][0]
    with pytest.raises(ValidationError) as no_reason:
        quota.amend_request(submitted.pk, by=cast["researcher"], changes={"gpus": 9}, reason=" ")
    assert "reason" in no_reason.value.message_dict
    submitted.refresh_from_db()
    assert submitted.gpus == 8  # nothing half-stored


def test_the_page_amends_and_the_decider_sees_it_was_amended(
    client, cast, submitted, django_capture_on_commit_callbacks
):
    url = reverse("quota-detail", args=[submitted.pk])
    client.force_login(cast["researcher"])
    assert 'id="amend"' in client.get(url).content.decode()
    mail.outbox.clear()
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(url, _amend_form(submitted, **{"amend-gpus": 12}), follow=True)
    body = unescape(response.content.decode())
    assert "amended; it still awaits a decision; an email goes to lead@example.org, nlp_lead@example.org" in body
    assert [m.to for m in mail.outbox] == [["lead@example.org", "nlp_lead@example.org"]]
    assert "GPUs 8 → 12" in mail.outbox[0].body and "the run needs more" in mail.outbox[0].body
    client.force_login(cast["nlp_lead"])
    page = unescape(client.get(url).content.decode())
    assert 'id="amended"' in page and "(GPUs 8 → 12): the run needs more" in page
    assert 'id="amend"' not in page  # a decider decides; only the requester amends


def test_a_bad_amendment_on_the_page_names_the_field_and_changes_nothing(client, cast, submitted):
    client.force_login(cast["researcher"])
    url = reverse("quota-detail", args=[submitted.pk])
    response = client.post(url, _amend_form(submitted, **{"amend-gpus": 0, "amend-reason": ""}))
    body = unescape(response.content.decode())
    assert "GPUs must be at least 1." in body and "GPUs: GPUs" not in body  # the label once
    assert "Why amend: Say why you amend it" in body
    submitted.refresh_from_db()
    assert submitted.gpus == 8 and 'id="amended"' not in body


def test_the_request_form_shows_each_team_s_guarantee_burst_cap_and_use_now(client, cast, teams, queues, orchestrator):
    Workload.objects.create(
        orchestrator=orchestrator, team=teams["nlp"], user="rita", external_id="7", gang_size=2, gpus_per_member=8,
        state=Workload.State.RUNNING, submitted_at=timezone.now(),
    )  # fmt: skip
    client.force_login(cast["researcher"])  # sees nlp only
    body = client.get(reverse("quota-new")).content.decode()
    row = body[body.index('<tr data-team="nlp">') :].split("</tr>")[0]
    cells = [cell.split(">")[-1] for cell in row.split("</td>")[:-1]]
    assert cells == ["NLP", "8", "32", "32", "16", "0"]  # guaranteed, burst limit, cap now (no grant), in use, waiting
    assert 'data-team="production"' not in body  # only the teams one may ask for
