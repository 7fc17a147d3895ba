"""Amend and extend over the API: the same services and rules as the quota page, audited, for each role, and a
bad body is a 400 naming the field."""

from datetime import timedelta

import pytest
from django.core import mail
from rest_framework.test import APIClient

from scheduling.models import QuotaRequest
from scheduling.services import quota

pytestmark = pytest.mark.django_db


def _as(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


@pytest.fixture
def submitted(cast, teams, queues, period):
    start, end = period
    return quota.create_request(
        requester=cast["researcher"], team=teams["nlp"], gpus=8, starts_at=start, ends_at=end, justification="ICML"
    )


@pytest.fixture
def granted(submitted, cast):
    quota.approve_request(submitted.pk, by=cast["nlp_lead"], comment="go")
    submitted.refresh_from_db()
    return submitted


def _amend(user, request, body):
    return _as(user).post(f"/api/v1/quota-requests/{request.pk}/amend/", body, format="json")


def _extend(user, request, body):
    return _as(user).post(f"/api/v1/quota-requests/{request.pk}/extend/", body, format="json")


def test_the_requester_amends_only_the_fields_sent_and_the_history_says_what_who_and_why(
    cast, submitted, django_capture_on_commit_callbacks
):
    cast["nlp_lead"].email = "nina@example.org"
    cast["nlp_lead"].save()
    with django_capture_on_commit_callbacks(execute=True):
        answer = _amend(cast["researcher"], submitted, {"gpus": 16, "reason": "the model grew"})
    assert answer.status_code == 200 and answer.json()["gpus"] == 16 and answer.json()["state"] == "submitted"
    submitted.refresh_from_db()
    assert (submitted.gpus, submitted.justification) == (16, "ICML")
    latest = submitted.history.select_related("history_user").latest("history_date")
    assert latest.history_user == cast["researcher"]
    assert latest.history_change_reason == "amended (GPUs 8 → 16): the model grew"
    assert any("nina@example.org" in m.to for m in mail.outbox)  # the deciders hear of it, as from the page


@pytest.mark.parametrize(("who", "status"), [("nlp_lead", 403), ("lead", 403), ("admin", 403), ("outsider", 404)])
def test_nobody_but_the_requester_amends(cast, submitted, who, status):
    assert _amend(cast[who], submitted, {"gpus": 4, "reason": "x"}).status_code == status
    submitted.refresh_from_db()
    assert submitted.gpus == 8


@pytest.mark.parametrize(
    ("body", "field", "rule"),
    [
        ({"gpus": 4}, "reason", "required"),
        ({"gpus": 0, "reason": "x"}, "gpus", "greater than or equal to 1"),
        ({"gpus": "six", "reason": "x"}, "gpus", "valid integer"),
        ({"ends_at": "soon", "reason": "x"}, "ends_at", "Datetime has wrong format"),
        ({"reason": "nothing else"}, "gpus", "nothing to amend"),
    ],
)
def test_a_bad_amendment_is_a_400_naming_the_field_and_changes_nothing(cast, submitted, body, field, rule):
    versions = submitted.history.count()
    answer = _amend(cast["researcher"], submitted, body)
    assert answer.status_code == 400 and rule in " ".join(answer.json()[field])
    submitted.refresh_from_db()
    assert submitted.gpus == 8 and submitted.history.count() == versions


def test_an_end_before_the_start_is_refused_by_the_services_rule(cast, submitted):
    answer = _amend(cast["researcher"], submitted, {"ends_at": submitted.starts_at.isoformat(), "reason": "x"})
    assert answer.status_code == 400 and "ends_at" in answer.json()


def test_a_decided_request_is_not_amended(cast, granted):
    answer = _amend(cast["researcher"], granted, {"gpus": 4, "reason": "x"})
    assert answer.status_code == 400 and "already decided" in answer.json()["state"][0]


def test_the_requester_extends_a_live_grant_into_a_new_request_from_its_end(cast, granted):
    grant = granted.grant
    answer = _extend(cast["researcher"], granted, {"ends_at": (grant.ends_at + timedelta(days=3)).isoformat(),
                                                   "justification": "one more run"})  # fmt: skip
    assert answer.status_code == 201
    extension = QuotaRequest.objects.get(pk=answer.json()["id"])
    assert (extension.extends, extension.state, extension.gpus, extension.starts_at) == (
        granted, QuotaRequest.State.SUBMITTED, 8, grant.ends_at
    )  # fmt: skip
    again = _extend(cast["researcher"], granted, {"ends_at": (grant.ends_at + timedelta(days=4)).isoformat(),
                                                  "justification": "x"})  # fmt: skip
    assert again.status_code == 400 and "already awaits a decision" in again.json()["ends_at"][0]


@pytest.mark.parametrize(("who", "status"), [("nlp_lead", 403), ("admin", 403), ("outsider", 404)])
def test_nobody_but_the_requester_extends(cast, granted, who, status):
    body = {"ends_at": (granted.grant.ends_at + timedelta(days=3)).isoformat(), "justification": "x"}
    assert _extend(cast[who], granted, body).status_code == status
    assert not granted.extensions.exists()


@pytest.mark.parametrize(
    ("body", "field"),
    [({"justification": "x"}, "ends_at"), ({"ends_at": "2030-01-01T00:00:00Z"}, "justification")],
)
def test_a_bad_extension_is_a_400_naming_the_field(cast, granted, body, field):
    answer = _extend(cast["researcher"], granted, body)
    assert answer.status_code == 400 and field in answer.json()
    assert not granted.extensions.exists()


def test_an_extension_ending_before_the_grant_names_ends_at(cast, granted):
    answer = _extend(cast["researcher"], granted, {"ends_at": granted.grant.ends_at.isoformat(), "justification": "x"})
    assert answer.status_code == 400 and "after the grant's end" in answer.json()["ends_at"][0]


def test_a_request_without_a_live_grant_cannot_be_extended(cast, submitted):
    answer = _extend(cast["researcher"], submitted, {"ends_at": "2030-01-01T00:00:00Z", "justification": "x"})
    assert answer.status_code == 400 and "no live grant" in answer.json()["ends_at"][0]


def test_both_actions_are_in_the_openapi_schema(admin_client):
    schema = admin_client.get("/api/schema/", HTTP_ACCEPT="application/json").json()
    for action, body in (("amend", "AmendRequest"), ("extend", "ExtendRequest")):
        post = schema["paths"][f"/api/v1/quota-requests/{{id}}/{action}/"]["post"]
        assert post["requestBody"]["content"]["application/json"]["schema"]["$ref"].endswith(body)
