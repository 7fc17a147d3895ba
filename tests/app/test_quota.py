from datetime import timedelta

import pytest
from django.core.exceptions import PermissionDenied, ValidationError
from django.utils import timezone

from scheduling.models import QuotaGrant, QuotaRequest
from scheduling.services import feasibility, quota

pytestmark = pytest.mark.django_db


def _request(cast, teams, period, gpus=8, who="researcher", team="nlp"):
    start, end = period
    return quota.create_request(
        requester=cast[who], team=teams[team], gpus=gpus, starts_at=start, ends_at=end, justification="paper deadline"
    )


def test_a_researcher_submits_and_a_lead_of_a_parent_team_approves(cast, teams, queues, period):
    request = _request(cast, teams, period)
    assert request.state == QuotaRequest.State.SUBMITTED
    grant = quota.approve_request(request.pk, by=cast["lead"], comment="ok for the deadline")
    request.refresh_from_db()
    assert request.state == QuotaRequest.State.APPROVED
    assert (grant.gpus, grant.team, grant.state) == (8, teams["nlp"], QuotaGrant.State.SCHEDULED)


def test_a_lead_of_another_team_cannot_decide(cast, teams, queues, period):
    request = _request(cast, teams, period)
    with pytest.raises(PermissionDenied):
        quota.approve_request(request.pk, by=cast["outsider"])


def test_a_lead_cannot_approve_their_own_request(cast, teams, queues, period):
    request = _request(cast, teams, period, who="nlp_lead")
    with pytest.raises(PermissionDenied):
        quota.approve_request(request.pk, by=cast["nlp_lead"])
    quota.approve_request(request.pk, by=cast["lead"])


def test_an_outsider_cannot_request_for_another_team(cast, teams, queues, period):
    with pytest.raises(PermissionDenied):
        _request(cast, teams, period, who="outsider", team="nlp")


def test_approval_refuses_gpus_beyond_unpromised_capacity(cast, teams, queues, period):
    # 64 GPUs, 40 guaranteed to top-level teams: 24 unpromised.
    request = _request(cast, teams, period, gpus=25)
    with pytest.raises(ValidationError) as error:
        quota.approve_request(request.pk, by=cast["admin"])
    assert "unpromised fleet capacity of 24 GPUs" in error.value.message_dict["gpus"][0]
    request.refresh_from_db()
    assert request.state == QuotaRequest.State.SUBMITTED
    assert not QuotaGrant.objects.exists()


def test_grants_that_do_not_overlap_in_time_do_not_compete(cast, teams, queues, period):
    start, end = period
    first = _request(cast, teams, (start, end), gpus=24)
    second = _request(cast, teams, (end, end + timedelta(days=3)), gpus=24)
    quota.approve_request(first.pk, by=cast["admin"])
    quota.approve_request(second.pk, by=cast["admin"])
    third = _request(cast, teams, (start, end + timedelta(days=1)), gpus=1)
    with pytest.raises(ValidationError):
        quota.approve_request(third.pk, by=cast["admin"])


def test_bad_input_names_the_field(cast, teams, queues, period):
    start, _ = period
    with pytest.raises(ValidationError) as error:
        quota.create_request(
            requester=cast["researcher"],
            team=teams["nlp"],
            gpus=0,
            starts_at=start,
            ends_at=start - timedelta(hours=1),
            justification="",
        )
    assert {"gpus", "ends_at", "justification"} <= set(error.value.message_dict)
    assert not QuotaRequest.objects.exists()


def test_a_denied_request_needs_a_comment_and_cannot_be_approved_later(cast, teams, queues, period):
    request = _request(cast, teams, period)
    with pytest.raises(ValidationError):
        quota.deny_request(request.pk, by=cast["lead"], comment=" ")
    quota.deny_request(request.pk, by=cast["lead"], comment="use the shared pool overnight")
    with pytest.raises(ValidationError) as error:
        quota.approve_request(request.pk, by=cast["admin"])
    assert "denied request cannot become approved" in error.value.message_dict["state"][0]


def test_grants_activate_and_expire_with_their_period(cast, teams, queues, period):
    start, end = period
    request = _request(cast, teams, period)
    grant = quota.approve_request(request.pk, by=cast["lead"])
    assert quota.sync_grant_states(now=start + timedelta(minutes=1)) == {"activated": 1, "expired": 0}
    grant.refresh_from_db()
    assert grant.state == QuotaGrant.State.ACTIVE
    assert quota.sync_grant_states(now=end) == {"activated": 0, "expired": 1}
    request.refresh_from_db()
    assert request.state == QuotaRequest.State.EXPIRED
    assert quota.sync_grant_states(now=end) == {"activated": 0, "expired": 0}


def test_revoking_a_grant_is_audited(cast, teams, queues, period):
    request = _request(cast, teams, period)
    grant = quota.approve_request(request.pk, by=cast["lead"])
    quota.revoke_grant(grant.pk, by=cast["admin"], reason="project cancelled")
    grant.refresh_from_db()
    assert grant.state == QuotaGrant.State.REVOKED
    assert grant.history.first().history_change_reason == "project cancelled"
    assert grant.history.first().history_user == cast["admin"]


def test_a_period_already_over_is_refused(cast, teams, queues):
    past = timezone.now() - timedelta(days=3)
    with pytest.raises(ValidationError) as error:
        quota.create_request(
            requester=cast["researcher"],
            team=teams["nlp"],
            gpus=1,
            starts_at=past,
            ends_at=past + timedelta(days=1),
            justification="late",
        )
    assert "already ended" in error.value.message_dict["ends_at"][0]


def test_a_model_request_is_refused_when_any_model_guarantees_already_fill_the_fleet(cast, teams, demo_like_fleet):
    # 287 of 320 GPUs are guaranteed to any model: A100's own 128 GPUs are not free for 128 more.
    request = _request(cast, teams, (timezone.now() + timedelta(days=2), timezone.now() + timedelta(days=9)), 128)
    request.gpu_model = "A100"
    request.save()
    with pytest.raises(ValidationError) as error:
        quota.approve_request(request.pk, by=cast["admin"])
    message = error.value.message_dict["gpus"][0]
    assert "unpromised A100 capacity of 33 GPUs" in message and "would be 415 on the fleet's 320 GPUs" in message
    assert not QuotaGrant.objects.exists()


def test_an_any_model_request_is_refused_once_a_model_grant_takes_the_spare(cast, teams, queues, period):
    # 64 H100, 40 guaranteed to any model: a 24-GPU H100 grant leaves nothing for any model.
    h100 = _request(cast, teams, period, gpus=24)
    h100.gpu_model = "H100"
    h100.save()
    quota.approve_request(h100.pk, by=cast["admin"])
    with pytest.raises(ValidationError) as error:
        quota.approve_request(_request(cast, teams, period, gpus=1).pk, by=cast["admin"])
    assert "would be 65 on the fleet's 64 GPUs (64 H100), 1 short" in error.value.message_dict["gpus"][0]


def test_the_feasibility_shown_before_deciding_gives_the_numbers_approval_uses(cast, teams, demo_like_fleet):
    start = timezone.now() + timedelta(days=5)
    request = _request(cast, teams, (start, start + timedelta(days=7)), gpus=40)
    shown = feasibility.check_request(teams["nlp"], 40, "", request.starts_at, request.ends_at, request.pk)
    with pytest.raises(ValidationError) as error:
        quota.approve_request(request.pk, by=cast["admin"])
    refused = error.value.message_dict["gpus"][0]
    sentence = refused.split(": ", 1)[1].rstrip(".")
    assert not shown.fits and shown.messages[0][0] == "bad"
    assert "by 7 GPUs (33 of 320 unpromised)" in shown.messages[0][1] and sentence in shown.messages[0][1]
