"""POST /api/v1/route and manage.py route: the same answer, from the same service, over the database."""

from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from scheduling.models import Node, Orchestrator
from tests.routing.test_parsing import SBATCH

pytestmark = pytest.mark.django_db


@pytest.fixture
def pools(orchestrator, fleet, queues):
    """slurm-a (64 GPUs, all busy) and an idle 32-GPU Kubernetes pool."""
    Node.objects.filter(orchestrator=orchestrator).update(gpu_allocated=8)
    k8s = Orchestrator.objects.create(name="k8s-a", kind="kubernetes", endpoint="https://k8s.example")
    for i in range(4):
        Node.objects.create(orchestrator=k8s, name=f"k{i}", gpu_model="H100", gpu_total=8, leaf_switch="kleaf")
    return k8s


def test_the_api_routes_a_training_job_to_the_pool_where_it_starts_first(api, pools):
    response = api("researcher").post("/api/v1/route", {"gpus": 8, "gang_size": 2, "duration_s": 7200,
                                                         "team": "nlp", "kind": "training"}, format="json")
    assert response.status_code == 200, response.content
    body = response.json()
    assert (body["orchestrator"], body["pool"], body["rule"]) == ("kubernetes", "k8s-a", "predicted-start")
    assert any(reason.startswith("kubernetes: starts now") for reason in body["reasons"])
    assert {c["pool"] for c in body["candidates"]} == {"slurm-a", "k8s-a"}


def test_an_explicit_scheduler_is_honoured(api, pools):
    response = api("researcher").post("/api/v1/route", {"gpus": 1, "team": "nlp", "scheduler": "slurm"}, format="json")
    assert response.json()["orchestrator"] == "slurm" and response.json()["rule"] == "explicit"


@pytest.mark.parametrize(("body", "field"), [
    ({"gpus": 0, "team": "nlp"}, "gpus"),
    ({"gpus": 1, "team": "nlp", "gang_size": 0}, "gang_size"),
    ({"gpus": 1, "team": "nlp", "scheduler": "pbs"}, "scheduler"),
    ({"gpus": 1, "team": "nlp", "kind": "party"}, "kind"),
    ({"gpus": 1}, "team"),
    ({"gpus": 1, "team": "production"}, "team"),  # not the researcher's team
])
def test_a_bad_description_is_a_400_naming_the_field(api, pools, body, field):
    response = api("researcher").post("/api/v1/route", body, format="json")
    assert response.status_code == 400 and field in response.json(), response.content


def test_anonymous_callers_are_refused(api, pools):
    assert api("anonymous").post("/api/v1/route", {"gpus": 1, "team": "nlp"}, format="json").status_code in (401, 403)


def test_the_command_routes_an_sbatch_script_with_every_candidates_wait(tmp_path, pools):
    script = tmp_path / "train.sbatch"
    script.write_text(SBATCH.replace("-N 4", "-N 2").replace("--time=1-12:00:00", "--time=2:00:00"))
    out = StringIO()
    call_command("route", str(script), stdout=out)
    text = out.getvalue()
    assert "2 × 8 GPU, team nlp" in text
    assert "-> kubernetes (k8s-a), rule predicted-start" in text
    assert "slurm: start unknown" in text or "slurm: starts in" in text


def test_the_command_refuses_a_file_without_gpus(tmp_path, pools):
    pod = tmp_path / "cpu.yaml"
    pod.write_text("kind: Pod\nmetadata: {namespace: nlp}\nspec: {containers: [{name: c}]}\n")
    with pytest.raises(CommandError, match="requests no GPUs"):
        call_command("route", str(pod))


def test_a_long_job_stays_on_the_rules_choice_even_when_another_pool_is_free(api, pools):
    response = api("researcher").post("/api/v1/route", {"gpus": 8, "gang_size": 2, "duration_s": 36 * 3600,
                                                         "team": "nlp", "kind": "training"}, format="json")
    body = response.json()
    assert body["orchestrator"] == "slurm"
    assert any("only work ending within 4 h may go elsewhere" in reason for reason in body["reasons"])
