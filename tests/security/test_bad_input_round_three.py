"""Issue 29 item 11: five inputs that answered 500 answer a 4xx naming what is wrong (or an empty result)."""

import base64

import pytest
from rest_framework.test import APIClient

from scheduling.models import WhatIfScenario

from .bad_input_support import api_as

pytestmark = pytest.mark.django_db


def test_a_usage_period_ending_at_the_first_representable_instant_is_a_400(cast, queues):
    response = api_as(cast["lead"]).get("/api/v1/usage/teams/nlp/users/?until=0001-01-01T00:00:00Z")
    assert response.status_code == 400, response.content[:300]


@pytest.mark.parametrize("user", ["%00", "a%00b"])
def test_a_nul_in_a_usage_user_name_is_a_4xx(cast, queues, user):
    response = api_as(cast["lead"]).get(f"/api/v1/usage/teams/nlp/users/{user}/jobs/")
    assert 400 <= response.status_code < 500, response.content[:300]


@pytest.mark.parametrize("named", [["slurm-a"], {"name": "slurm-a"}, 7, None])
def test_a_what_if_policy_whose_orchestrator_is_not_a_name_is_a_400(cast, queues, named):
    policy = {"orchestrator": named, "weekdays": [1], "start": "08:00", "end": "20:00", "floor_gpus": 8}
    inputs = {"weeks": 1, "policies": [policy]}
    response = api_as(cast["admin"]).post("/api/v1/whatif/", {"name": "w", "inputs": inputs}, format="json")
    assert response.status_code == 400, response.content[:300]
    assert "orchestrator must be one of slurm-a" in str(response.json())
    assert not WhatIfScenario.objects.exists()


@pytest.mark.parametrize("name", ["ri\x00ta", "\x00"])
def test_a_nul_in_a_basic_auth_user_name_is_a_401(cast, name):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION="Basic " + base64.b64encode(f"{name}:pw".encode()).decode())
    assert client.post("/api/v1/auth/tokens/").status_code == 401


def test_a_nul_in_the_my_workloads_search_is_a_400(client, cast):
    client.force_login(cast["researcher"])
    response = client.get("/workloads/mine/?q=a%00b")
    assert response.status_code == 400
