"""Issue 16: quota requests: a bounded justification, and a double submission files one request."""

from datetime import timedelta

import pytest
from django.core.exceptions import ValidationError
from django.urls import reverse
from django.utils import timezone

from scheduling.limits import JUSTIFICATION_MAX_CHARS
from scheduling.models import QuotaRequest
from scheduling.services import quota

from .bad_input_support import api_as

pytestmark = pytest.mark.django_db


def _body(teams, **overrides) -> dict:
    start = timezone.now() + timedelta(days=1)
    return {
        "team": teams["nlp"].slug,
        "gpus": 4,
        "starts_at": start.isoformat(),
        "ends_at": (start + timedelta(days=7)).isoformat(),
        "justification": "ablation study",
        **overrides,
    }


def test_an_api_justification_of_two_megabytes_is_a_400_naming_the_field_and_the_limit(cast, teams, queues):
    response = api_as(cast["researcher"]).post(
        "/api/v1/quota-requests/", _body(teams, justification="x" * 2_000_000), format="json"
    )
    assert response.status_code == 400
    assert str(JUSTIFICATION_MAX_CHARS) in response.json()["justification"][0]
    assert not QuotaRequest.objects.exists()


def test_a_justification_at_the_limit_is_accepted(cast, teams, queues):
    response = api_as(cast["researcher"]).post(
        "/api/v1/quota-requests/", _body(teams, justification="x" * JUSTIFICATION_MAX_CHARS), format="json"
    )
    assert response.status_code == 201, response.content[:300]


def test_the_service_refuses_a_justification_over_the_limit_whoever_calls_it(cast, teams, queues):
    start = timezone.now() + timedelta(days=1)
    with pytest.raises(ValidationError) as refused:
        quota.create_request(
            requester=cast["researcher"],
            team=teams["nlp"],
            gpus=1,
            starts_at=start,
            ends_at=start + timedelta(days=1),
            justification="x" * (JUSTIFICATION_MAX_CHARS + 1),
        )
    assert str(JUSTIFICATION_MAX_CHARS) in refused.value.message_dict["justification"][0]


def test_the_form_and_the_api_share_the_justification_limit(client, cast, teams, queues):
    client.force_login(cast["researcher"])
    body = _body(teams, team=teams["nlp"].pk, justification="x" * (JUSTIFICATION_MAX_CHARS + 1), action="submit")
    response = client.post(reverse("quota-new"), body)
    assert response.status_code == 200
    assert f"at most {JUSTIFICATION_MAX_CHARS} characters" in response.content.decode()
    assert not QuotaRequest.objects.exists()
