"""Identity overrides (submitter name -> portal user) through the API and the admin: admins write with a
reason (audited), others read only, bad input is a 400 naming the field and the rule."""

import pytest
from django.urls import reverse

from scheduling.models import IdentityOverride, Orchestrator

URL = "/api/v1/identity-overrides/"


@pytest.fixture
def hpc(db):
    return Orchestrator.objects.create(name="hpc", kind="slurm", endpoint="https://slurm.example:6820")


def test_an_admin_maps_a_slurm_user_to_a_researcher_with_a_reason_kept_in_its_history(api, cast, hpc):
    body = {"user": "rita", "orchestrator": "hpc", "kind": "slurm_user", "name": "rsmith", "reason": "HPC login"}
    response = api("admin").post(URL, body, format="json")
    assert response.status_code == 201, response.content
    override = IdentityOverride.objects.get()
    assert (override.user, override.orchestrator, override.kind, override.name) == (
        cast["researcher"], hpc, "slurm_user", "rsmith"
    )
    version = override.history.get()
    assert version.history_user == cast["admin"] and version.history_change_reason == "HPC login"
    assert response.json()["user"] == "rita" and "reason" not in response.json()


def test_a_fleet_wide_override_has_no_orchestrator(api, cast):
    body = {"user": "rita", "kind": "ray_submitter", "name": "Rita S.", "reason": "notebook name"}
    response = api("admin").post(URL, body, format="json")
    assert response.status_code == 201, response.content
    assert IdentityOverride.objects.get().orchestrator is None


def test_an_override_naming_an_unknown_user_is_a_400_naming_the_field(api, hpc):
    body = {"user": "zed", "orchestrator": "hpc", "kind": "slurm_user", "name": "z", "reason": "r"}
    response = api("admin").post(URL, body, format="json")
    assert response.status_code == 400
    assert response.json()["user"] == ["'zed' is not a portal user"]
    assert not IdentityOverride.objects.exists()


def test_a_name_its_kind_cannot_have_is_a_400_saying_the_rule(api, hpc):
    body = {"user": "rita", "kind": "kubernetes_service_account", "name": "runner", "reason": "r"}
    response = api("admin").post(URL, body, format="json")
    assert response.status_code == 400
    assert "'runner' is not namespace/name of a service account" in response.json()["name"][0]


def test_a_kind_from_another_orchestrator_kind_is_refused(api, hpc):
    body = {"user": "rita", "orchestrator": "hpc", "kind": "ray_submitter", "name": "rita", "reason": "r"}
    response = api("admin").post(URL, body, format="json")
    assert response.status_code == 400
    assert response.json()["kind"] == ["a ray_submitter name comes from a ray orchestrator; hpc is slurm"]


def test_an_unknown_orchestrator_or_kind_and_a_missing_reason_are_400s_naming_each_field(api, hpc):
    body = {"user": "rita", "orchestrator": "nope", "kind": "email", "name": "x", "reason": " "}
    response = api("admin").post(URL, body, format="json")
    assert response.status_code == 400 and {"orchestrator", "kind", "reason"} <= set(response.json())


def test_a_researcher_reads_overrides_but_cannot_write_them(api, cast, hpc):
    IdentityOverride.objects.create(user=cast["researcher"], orchestrator=hpc, kind="slurm_user", name="rsmith")
    assert api("researcher").get(URL).json()["results"][0]["name"] == "rsmith"
    body = {"user": "rita", "kind": "slurm_user", "name": "root", "reason": "mine now"}
    assert api("researcher").post(URL, body, format="json").status_code == 403
    assert IdentityOverride.objects.count() == 1


def test_deleting_an_override_is_audited(api, cast, hpc):
    override = IdentityOverride.objects.create(user=cast["researcher"], orchestrator=hpc, kind="slurm_user", name="r")
    assert api("admin").delete(f"{URL}{override.pk}/?reason=account closed").status_code == 204
    deleted = IdentityOverride.history.get(history_type="-")
    assert deleted.history_user == cast["admin"] and deleted.history_change_reason == "account closed"


def test_the_admin_saves_an_override_with_the_reason_typed_in(client, cast, hpc):
    client.force_login(cast["admin"])
    response = client.post(
        reverse("admin:scheduling_identityoverride_add"),
        {"user": cast["lead"].pk, "orchestrator": hpc.pk, "kind": "slurm_user", "name": "leo2", "change_reason": "x"},
    )
    assert response.status_code == 302, response.content[:2000]
    version = IdentityOverride.objects.get().history.get()
    assert version.history_user == cast["admin"] and version.history_change_reason == "x"


def test_the_same_override_twice_is_refused(api, cast):
    body = {"user": "rita", "kind": "slurm_user", "name": "rsmith", "reason": "r"}
    assert api("admin").post(URL, body, format="json").status_code == 201
    response = api("admin").post(URL, body, format="json")
    assert response.status_code == 400 and IdentityOverride.objects.count() == 1
