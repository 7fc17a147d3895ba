"""Issue 16: orchestrator options of the wrong shape were stored (a string, a null, ``"timeout_s": "fast"``)
and then every scrape raised; now the API, the admin and the command refuse them naming the key and the rule.
And ``"enabled": false`` on POST was ignored."""

import json

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from scheduling.models import Orchestrator
from scheduling.orchestrator_options import options_problems

from .bad_input_support import api_as

pytestmark = pytest.mark.django_db

BAD = [
    ("a string", "options"),
    (None, "options"),
    ([1, 2], "options"),
    ({"timeout_s": "fast"}, "options.timeout_s"),
    ({"timeout_s": -1}, "options.timeout_s"),
    ({"user": 7}, "options.user"),
    ({"api_version": "38"}, "options.api_version"),
    ({"team_field": "group"}, "options.team_field"),
    ({"team_aliases": ["a"]}, "options.team_aliases"),
    ({"rebalance": "yes"}, "options.rebalance"),
    ({"rebalance": {"dry_run": "no"}}, "options.rebalance.dry_run"),
    ({"rebalance": {"target_utilization_fraction": 3}}, "options.rebalance.target_utilization_fraction"),
    ({"dry-run": True}, "unknown key dry-run"),
]

# Every key a reader takes from the options, with its default: the schema must know them all.
EVERY_KEY = {
    "slurm": {
        "user": "slurm",
        "api_version": "v0.0.38",
        "team_field": "account",
        "team_aliases": {"llm-proj": "llm"},
        "timeout_s": 10.0,
        "slurm_conf": "/etc/gpuportal/credentials/slurm.conf",
        "rebalance": {
            "dry_run": True,
            "auto_apply": False,
            "preempt_gangs": False,
            "target_utilization_fraction": 0.8,
            "slurm_conf": "/etc/gpuportal/credentials/slurm.conf",
        },
    },
    "kubernetes": {
        "kubeconfig": "/etc/gpuportal/credentials/kubeconfig",
        "in_cluster": False,
        "volcano": True,
        "team_label": "team",
        "team_aliases": {},
        "timeout_s": 10,
        "rebalance": {"dry_run": True, "auto_apply": False, "preempt_gangs": False, "target_utilization_fraction": 1},
    },
    "ray": {
        "timeout_s": 5,
        "team_aliases": {},
        "rebalance": {"dry_run": False, "ray_node_type": "gpu_worker", "autoscaler_config": "/etc/ray/cluster.yaml"},
    },
    "prometheus": {
        "metric": "DCGM_FI_DEV_GPU_UTIL",
        "selector": 'cluster="east"',
        "step_s": 15,
        "lag_s": 0,
        "catchup_s": 3600,
        "margin_s": 120,
        "max_points": 250_000,
        "orchestrators": ["slurm-a"],
        "auth": "basic",
        "timeout_s": 10.0,
    },
}


@pytest.mark.parametrize("kind", sorted(EVERY_KEY))
def test_every_option_the_readers_use_fits_the_schema_of_its_kind(kind):
    assert options_problems(kind, EVERY_KEY[kind]) == []


def test_an_option_of_another_kind_is_refused_naming_the_kind():
    problems = options_problems("prometheus", {"kubeconfig": "/x"})
    assert problems and "unknown key kubeconfig for a prometheus source" in problems[0]


@pytest.mark.parametrize("options, named", BAD)
def test_api_post_refuses_bad_options_naming_the_key(cast, options, named):
    body = {"name": "hpc", "kind": "slurm", "endpoint": "https://slurm.example:6820", "options": options}
    response = api_as(cast["admin"]).post("/api/v1/orchestrators/", body, format="json")
    assert response.status_code == 400, response.content[:300]
    assert "options" in response.json() and named in json.dumps(response.json())
    assert not Orchestrator.objects.filter(name="hpc").exists()


@pytest.mark.parametrize("options, named", BAD)
def test_api_patch_refuses_bad_options_naming_the_key(cast, orchestrator, options, named):
    response = api_as(cast["admin"]).patch(
        f"/api/v1/orchestrators/{orchestrator.pk}/", {"options": options}, format="json"
    )
    assert response.status_code == 400, response.content[:300]
    assert "options" in response.json() and named in json.dumps(response.json())
    orchestrator.refresh_from_db()
    assert orchestrator.options == {}


def test_api_patch_of_the_kind_checks_the_stored_options_against_the_new_kind(cast, orchestrator):
    orchestrator.options = {"user": "slurm"}
    orchestrator.save()
    response = api_as(cast["admin"]).patch(
        f"/api/v1/orchestrators/{orchestrator.pk}/", {"kind": "prometheus"}, format="json"
    )
    assert response.status_code == 400 and "unknown key user" in json.dumps(response.json())


def test_api_accepts_good_options(cast, orchestrator):
    response = api_as(cast["admin"]).patch(
        f"/api/v1/orchestrators/{orchestrator.pk}/", {"options": EVERY_KEY["slurm"]}, format="json"
    )
    assert response.status_code == 200, response.content[:300]
    orchestrator.refresh_from_db()
    assert orchestrator.options == EVERY_KEY["slurm"]


def test_the_admin_refuses_bad_options_with_a_form_error(client, cast, orchestrator):
    client.force_login(cast["admin"])
    response = client.post(
        reverse("admin:scheduling_orchestrator_change", args=[orchestrator.pk]),
        {
            "name": orchestrator.name,
            "kind": "slurm",
            "endpoint": orchestrator.endpoint,
            "enabled": "on",
            "options": '{"rebalance": {"dry_run": "no"}}',
            "change_reason": "tuning",
        },
    )
    assert response.status_code == 200
    assert "options.rebalance.dry_run" in response.content.decode()
    orchestrator.refresh_from_db()
    assert orchestrator.options == {}


def test_the_command_refuses_bad_options_naming_the_key(db):
    with pytest.raises(CommandError, match=r"options\.api_version"):
        call_command("register_orchestrator", kind="slurm", name="hpc", url="http://slurm:6820", api_version="38")
    assert not Orchestrator.objects.filter(name="hpc").exists()


def test_api_post_keeps_enabled_false(cast):
    body = {"name": "spare", "kind": "ray", "endpoint": "http://ray-head:8265", "enabled": False}
    response = api_as(cast["admin"]).post("/api/v1/orchestrators/", body, format="json")
    assert response.status_code == 201, response.content[:300]
    assert response.json()["enabled"] is False
    assert Orchestrator.objects.get(name="spare").enabled is False


def test_api_post_without_enabled_starts_enabled(cast):
    body = {"name": "sweeps", "kind": "ray", "endpoint": "http://ray-head:8265"}
    response = api_as(cast["admin"]).post("/api/v1/orchestrators/", body, format="json")
    assert response.status_code == 201 and Orchestrator.objects.get(name="sweeps").enabled is True


@pytest.mark.parametrize("kubeconfig", ["/root/.kube/config", "/etc/gpuportal/credentials/../../shadow", "relative"])
def test_a_kubeconfig_outside_the_credentials_directories_is_refused_naming_the_rule(cast, kubeconfig):
    """A kubeconfig holds a client credential and names the server it goes to: like a file: reference."""
    body = {
        "name": "k",
        "kind": "kubernetes",
        "endpoint": "https://k8s.example:6443",
        "options": {"kubeconfig": kubeconfig},
    }
    response = api_as(cast["admin"]).post("/api/v1/orchestrators/", body, format="json")
    assert response.status_code == 400
    assert "options.kubeconfig: file: " in json.dumps(response.json())  # "must lie inside" or "absolute path inside"
    assert not Orchestrator.objects.filter(name="k").exists()
    inside = {**body, "options": {"kubeconfig": "/etc/gpuportal/credentials/east.kubeconfig"}}
    assert api_as(cast["admin"]).post("/api/v1/orchestrators/", inside, format="json").status_code == 201
