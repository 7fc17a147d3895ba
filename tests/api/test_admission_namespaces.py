"""Issue 30, item 3: namespaces mapped to a team belong to it. The governance mapping (team -> namespaces on a
Kubernetes orchestrator) and the namespace label ``gpuportal.io/team`` that governance writes decide whose a pod
is for the webhook and for the collector's attribution (hence workloads, usage, fair share and the ledger,
which read the attributed team). Before, the mapping only wrote quotas: "namespace 'nlp-train' maps to no team"."""

import pytest

from scheduling.collectors.k8s import with_labelled_namespaces
from scheduling.collectors.k8s_admission import Admission
from scheduling.models import AdmissionDecision, Orchestrator
from scheduling.services.orchestrators import team_mapping

from .test_admission import patch_of, pod, pool_node, post, review

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("admission_process")]

MAPPED = {"governance": {"namespaces": {"nlp": ["nlp-train", "nlp-serve"]}}}


@pytest.fixture
def mapped(queues):
    orchestrator = Orchestrator.objects.create(name="k8s-a", kind="kubernetes", endpoint="https://k8s.example",
                                               options=MAPPED)
    pool_node(orchestrator)
    return orchestrator


def test_a_pod_in_a_mapped_namespace_is_routed_as_its_teams(client, mapped):
    response = post(client, review(pod(namespace="nlp-train"), namespace="nlp-train"))
    assert response.json()["response"]["allowed"] is True
    assert patch_of(response)["/spec/schedulerName"] == "volcano"
    assert AdmissionDecision.objects.get().team.slug == "nlp"


def test_a_pod_in_a_mapped_namespace_cannot_claim_another_team_by_its_label(client, mapped):
    obj = pod(namespace="nlp-train")
    obj["metadata"]["labels"] = {"scheduler.gpuportal.io/team": "production"}
    post(client, review(obj, namespace="nlp-train"))
    assert AdmissionDecision.objects.get().team.slug == "nlp"


def test_the_collector_attributes_a_mapped_namespaces_pods_to_the_team():
    teams = team_mapping({"team_label": "team", **MAPPED})
    assert teams.k8s_team("nlp-train", {}) == "nlp"
    assert teams.k8s_team("nlp-train", {"team": "vision"}) == "nlp"  # the namespace is the team's
    assert teams.k8s_team("vision", {}) == "vision"


def test_the_collector_follows_the_team_label_governance_wrote_on_a_namespace():
    labels = {"cv-batch": {"gpuportal.io/team": "vision"}, "nlp-train": {"gpuportal.io/team": "x"}, "other": {}}
    admission = Admission(0.0, (), labels)
    teams = with_labelled_namespaces(team_mapping(MAPPED), admission)
    assert teams.k8s_team("cv-batch", {}) == "vision"
    assert teams.k8s_team("nlp-train", {}) == "nlp"  # the explicit mapping wins over a label
    assert teams.k8s_team("other", {}) == "other"
