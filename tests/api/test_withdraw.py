"""The requester withdraws a submitted request through the API; nobody else may, and a decided one stays."""

import pytest
from rest_framework.test import APIClient

from scheduling.models import QuotaRequest

pytestmark = pytest.mark.django_db


def _as(user) -> APIClient:
    client = APIClient()
    client.force_authenticate(user)
    return client


def test_only_the_requester_withdraws_and_only_while_nobody_has_decided(cast, teams, period):
    start, end = period
    request = QuotaRequest.objects.create(
        team=teams["nlp"], requester=cast["researcher"], gpus=4, starts_at=start, ends_at=end, justification="x",
        state=QuotaRequest.State.SUBMITTED,
    )  # fmt: skip
    url = f"/api/v1/quota-requests/{request.pk}/withdraw/"
    assert _as(cast["nlp_lead"]).post(url, {"comment": "no"}, format="json").status_code == 403
    answer = _as(cast["researcher"]).post(url, {"comment": "plans changed"}, format="json")
    assert answer.status_code == 200 and answer.json()["state"] == "withdrawn"
    again = _as(cast["researcher"]).post(url, {}, format="json")
    assert again.status_code == 400 and "cannot become withdrawn" in str(again.json())
    reasons = list(request.history.values_list("history_change_reason", flat=True))
    assert "plans changed" in reasons
