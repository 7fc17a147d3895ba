"""Issue 29 item 6: no option makes the worker read any file or run any program, a loopback or link-local address
is no orchestrator, and a re-pointed orchestrator does not take its stored secret along unless it is re-entered."""

import pytest
from knox.models import AuthToken
from rest_framework.test import APIClient

from scheduling.models import Orchestrator

pytestmark = pytest.mark.django_db

URL = "/api/v1/orchestrators/"


@pytest.fixture
def admin_api(cast):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {AuthToken.objects.create(cast['admin'])[1]}")
    return client


def _slurm(options, endpoint="https://slurm.example:6820", name="hpc"):
    return {"name": name, "kind": "slurm", "endpoint": endpoint, "options": options}


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"slurm_conf": "/etc/shadow"}, "options.slurm_conf"),
        ({"rebalance": {"slurm_conf": "/etc/passwd"}}, "options.rebalance.slurm_conf"),
        ({"governance": {"sacctmgr": "/bin/cat"}}, "options.governance.sacctmgr"),
        ({"governance": {"sacctmgr": "/tmp/evil/sacctmgr"}}, "options.governance.sacctmgr"),
        ({"accounting": {"sacct": "python3"}}, "options.accounting.sacct"),
    ],
)
def test_a_file_outside_the_credentials_dirs_or_a_program_outside_the_allow_rule_is_refused(
    admin_api, credentials_dir, options, field
):
    response = admin_api.post(URL, _slurm(options), format="json")
    assert response.status_code == 400
    assert any(message.startswith(f"{field}: ") for message in response.json()["options"]), response.json()
    assert not Orchestrator.objects.exists()


def test_slurm_conf_inside_the_credentials_dirs_and_the_plain_commands_are_accepted(admin_api, credentials_dir):
    conf = credentials_dir / "slurm.conf"
    conf.write_text("ClusterName=hpc\n")
    options = {"slurm_conf": str(conf), "governance": {"sacctmgr": "sacctmgr"}, "accounting": {"sacct": "sacct"}}
    assert admin_api.post(URL, _slurm(options), format="json").status_code == 201


def test_a_program_of_the_right_name_in_an_allowed_directory_is_accepted(admin_api, tmp_path, settings):
    bin_dir = tmp_path / "slurm-bin"
    bin_dir.mkdir()
    (bin_dir / "sacctmgr").write_text("#!/bin/sh\n")
    settings.GPUPORTAL_SLURM_BIN_DIRS = [str(bin_dir)]
    options = {"governance": {"sacctmgr": str(bin_dir / "sacctmgr")}}
    assert admin_api.post(URL, _slurm(options), format="json").status_code == 201


@pytest.mark.parametrize(
    "endpoint",
    ["http://169.254.169.254/latest/meta-data/", "http://[fe80::1]:6820", "http://[::ffff:169.254.169.254]/"],
)
def test_a_link_local_endpoint_is_refused_always(admin_api, endpoint):
    response = admin_api.post(URL, _slurm({}, endpoint), format="json")
    assert response.status_code == 400 and "link-local" in response.json()["endpoint"][0]


@pytest.mark.parametrize("endpoint", ["http://127.0.0.1:6820", "http://localhost:6820", "http://[::1]:6820"])
def test_a_loopback_endpoint_is_refused_unless_the_site_allows_it(admin_api, settings, endpoint):
    settings.GPUPORTAL_ALLOW_LOOPBACK_ENDPOINTS = False
    response = admin_api.post(URL, _slurm({}, endpoint), format="json")
    assert response.status_code == 400 and "loopback" in response.json()["endpoint"][0]
    settings.GPUPORTAL_ALLOW_LOOPBACK_ENDPOINTS = True
    assert admin_api.post(URL, _slurm({}, endpoint), format="json").status_code == 201


@pytest.fixture
def with_secret(db):
    return Orchestrator.objects.create(
        name="hpc", kind="slurm", endpoint="https://slurm.example:6820", credentials_ref="env:GPUPORTAL_SECRET_HPC"
    )


def test_a_re_pointed_orchestrator_keeps_its_secret_only_when_the_reference_is_entered_again(admin_api, with_secret):
    url = f"{URL}{with_secret.pk}/"
    moved = admin_api.patch(url, {"endpoint": "https://attacker.example"}, format="json")
    assert moved.status_code == 400
    assert "enter the credentials reference again" in moved.json()["credentials_ref"][0]
    assert Orchestrator.objects.get().endpoint == "https://slurm.example:6820"
    again = {"endpoint": "https://slurm2.example:6820", "credentials_ref": "env:GPUPORTAL_SECRET_HPC"}
    assert admin_api.patch(url, again, format="json").status_code == 200
    assert admin_api.patch(url, {"enabled": False}, format="json").status_code == 200  # no endpoint change


def test_the_admin_form_asks_the_same_before_re_pointing(client, cast, with_secret):
    client.force_login(cast["admin"])
    stored = {"name": "hpc", "kind": "slurm", "credentials_ref": "env:GPUPORTAL_SECRET_HPC", "enabled": "on"}
    form = {**stored, "endpoint": "https://attacker.example", "options": "{}", "change_reason": "move"}
    page = client.post(f"/admin/scheduling/orchestrator/{with_secret.pk}/change/", form)
    assert page.status_code == 200
    assert "enter the credentials reference again" in page.context["adminform"].form.errors["credentials_ref"][0]
    assert Orchestrator.objects.get().endpoint == "https://slurm.example:6820"
    ticked = client.post(
        f"/admin/scheduling/orchestrator/{with_secret.pk}/change/", {**form, "send_secret_to_new_endpoint": "on"}
    )
    assert ticked.status_code == 302 and Orchestrator.objects.get().endpoint == "https://attacker.example"
