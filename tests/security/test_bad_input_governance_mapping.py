"""Issue 18: a team -> namespaces mapping that names an unknown team, a namespace twice or a name Kubernetes refuses
is an error naming the field before anything is stored (API, admin, model), and one naming a namespace missing
from the cluster stops that orchestrator's round before any write (tests/app/test_enforcement.py, live in
tests/governance_live/test_enforcement_rounds_live.py)."""

import json

import pytest
from django.core.exceptions import ValidationError
from django.urls import reverse

from scheduling.models import Orchestrator

from .bad_input_support import api_as

pytestmark = pytest.mark.django_db

BAD = [
    ({"research": ["research"], "reserch": ["nlp-x"]}, "options.governance.namespaces.reserch", "is not a team"),
    ({"research": ["shared"], "nlp": ["shared"]}, "options.governance.namespaces.research", "mapped to 'nlp' already"),
    ({"research": ["Research_NS"]}, "options.governance.namespaces.research.0", "is not a namespace name"),
]


def k8s_options(mapping: dict) -> dict:
    return {"governance": {"mode": "auto", "namespaces": mapping}}


@pytest.mark.parametrize("mapping, field, rule", BAD)
def test_api_post_refuses_a_bad_mapping_naming_the_field(cast, teams, mapping, field, rule):
    body = {
        "name": "k8s",
        "kind": "kubernetes",
        "endpoint": "https://k8s.example:6443",
        "options": k8s_options(mapping),
    }
    response = api_as(cast["admin"]).post("/api/v1/orchestrators/", body, format="json")
    assert response.status_code == 400, response.content[:300]
    problems = json.dumps(response.json()["options"])
    assert field in problems and rule in problems
    assert not Orchestrator.objects.filter(name="k8s").exists()


def test_the_admin_refuses_a_mapping_naming_an_unknown_team_and_keeps_the_stored_one(client, cast, teams):
    k8s = Orchestrator.objects.create(name="k8s", kind="kubernetes", endpoint="https://k8s.example:6443")
    client.force_login(cast["admin"])
    response = client.post(
        reverse("admin:scheduling_orchestrator_change", args=[k8s.pk]),
        {
            "name": "k8s",
            "kind": "kubernetes",
            "endpoint": k8s.endpoint,
            "enabled": "on",
            "options": json.dumps(k8s_options({"reserch": ["research"]})),
            "change_reason": "map the teams",
        },
    )
    assert response.status_code == 200
    assert "options.governance.namespaces.reserch: &#x27;reserch&#x27; is not a team" in response.content.decode()
    k8s.refresh_from_db()
    assert k8s.options == {}


def test_a_mapping_of_existing_teams_each_namespace_once_is_accepted(cast, teams):
    body = {
        "name": "k8s",
        "kind": "kubernetes",
        "endpoint": "https://k8s.example:6443",
        "options": k8s_options({"research": ["research", "research-serve"], "nlp": ["nlp"]}),
    }
    response = api_as(cast["admin"]).post("/api/v1/orchestrators/", body, format="json")
    assert response.status_code == 201, response.content[:300]


def test_the_model_check_names_the_team(teams):
    k8s = Orchestrator(name="k8s", kind="kubernetes", endpoint="https://k8s.example", options=k8s_options({"x": []}))
    with pytest.raises(ValidationError, match=r"options\.governance\.namespaces\.x: 'x' is not a team"):
        k8s.full_clean()
