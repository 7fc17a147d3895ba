"""Issue 16: what-if validation: a NaN weight made a Decimal comparison raise (a 500), and the answer about a
quota request told a lead another team's request state ("#2 is submitted" against "no quota request #9999")."""

import pytest
from django.urls import reverse

from scheduling.models import Membership, WhatIfScenario
from scheduling.services import quota

from .bad_input_support import api_as

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_client(client, cast, queues):
    client.force_login(cast["admin"])
    return client


# --- what-if weights -----------------------------------------------------------------------------------


@pytest.mark.parametrize("weight", ["NaN", "Infinity", "-Infinity", "-5", "sNaN"])
def test_an_api_what_if_weight_that_is_not_a_percentage_is_a_400_naming_weights(cast, queues, weight):
    inputs = {"weeks": 1, "weights": {"research": weight}}
    response = api_as(cast["admin"]).post("/api/v1/whatif/", {"name": "w", "inputs": inputs}, format="json")
    assert response.status_code == 400, response.content[:300]
    assert "between 0 and 100" in response.json()["weights"][0] or "number" in response.json()["weights"][0]
    assert not WhatIfScenario.objects.exists()


@pytest.mark.parametrize("weight", ["NaN", "Infinity", "-5"])
def test_a_form_what_if_weight_that_is_not_a_percentage_is_a_field_error(admin_client, teams, weight):
    response = admin_client.post(
        reverse("whatif"), {"name": "w", "weeks": 1, "seed": 0, "weight_team": "research", "weight_value": weight}
    )
    assert response.status_code == 400
    assert not WhatIfScenario.objects.exists()
    errors = response.context["form"].errors
    assert "weight_value" in errors, errors


def test_a_nul_in_a_what_if_team_choice_is_a_field_error(admin_client, teams):
    response = admin_client.post(
        reverse("whatif"), {"name": "w", "weeks": 1, "seed": 0, "weight_team": "research\x00", "weight_value": "30"}
    )
    assert response.status_code == 400 and "weight_team" in response.context["form"].errors


# --- what-if leak ----------------------------------------------------------------------------------------


def test_a_lead_learns_nothing_about_another_teams_request_from_what_if_validation(cast, teams, queues, period):
    start, end = period
    theirs = quota.create_request(
        requester=cast["outsider"], team=teams["production"], gpus=2, starts_at=start, ends_at=end, justification="x"
    )
    client = api_as(cast["lead"])

    def answer(pk: int) -> dict:
        body = {"name": "w", "team": "research", "inputs": {"quota_request": pk}}
        response = client.post("/api/v1/whatif/", body, format="json")
        assert response.status_code == 400
        return response.json()

    invisible, missing = answer(theirs.pk), answer(99_999)
    assert invisible["quota_request"] == [m.replace("99999", str(theirs.pk)) for m in missing["quota_request"]]
    assert "submitted" not in str(invisible)


def test_a_lead_still_hears_why_their_own_teams_request_does_not_apply(cast, teams, queues, period):
    start, end = period
    ours = quota.create_request(
        requester=cast["researcher"], team=teams["nlp"], gpus=2, starts_at=start, ends_at=end, justification="x"
    )
    assert Membership.objects.filter(user=cast["lead"], team=teams["research"]).exists()
    body = {"name": "w", "team": "research", "inputs": {"quota_request": ours.pk}}
    response = api_as(cast["lead"]).post("/api/v1/whatif/", body, format="json")
    assert response.status_code == 400 and "submitted" in response.json()["quota_request"][0]
