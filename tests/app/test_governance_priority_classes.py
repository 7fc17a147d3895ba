"""Issue 30, item 4: governance creates and keeps the priority classes the admission webhook sets. Before, nothing
made them: turning the webhook on made the API server refuse every routed pod ("no PriorityClass with name
gpuportal-batch was found")."""

from scheduling.collectors.governance_apply import _kubernetes_write
from scheduling.engine.governance_state import (
    Action,
    GovernanceInput,
    GovOrchestrator,
    GovTeam,
    desired_state,
    diff,
)
from scheduling.engine.governance_types import PRIORITY_CLASSES, K8sPriorityClass
from scheduling.engine.types import OrchestratorKind
from scheduling.services.admission import PRIORITY_CLASSES as WEBHOOK_CLASSES


def kubernetes_state():
    data = GovernanceInput(teams=(GovTeam("nlp"),), queues=())
    orch = GovOrchestrator("k8s-a", OrchestratorKind.KUBERNETES)
    return desired_state(data, [orch], 0.0)["k8s-a"]


def test_every_kubernetes_cluster_is_given_the_classes_the_webhook_sets_serving_above_batch():
    classes = {o.name: o for o in kubernetes_state().objects if isinstance(o, K8sPriorityClass)}
    assert set(classes) == set(WEBHOOK_CLASSES.values()) == set(PRIORITY_CLASSES)
    assert classes["gpuportal-serving"].value > classes["gpuportal-batch"].value


def test_a_missing_class_is_created_and_one_governance_made_is_never_deleted():
    desired = kubernetes_state()
    created = [c for c in diff(desired, []).changes if isinstance(c.desired, K8sPriorityClass)]
    assert {c.action for c in created} == {Action.CREATE} and len(created) == 2
    stale = K8sPriorityClass("gpuportal-old", 10, "old")
    deletion = next(c for c in diff(desired, [stale], last_applied=[stale]).changes if c.observed == stale)
    assert deletion.action is Action.DELETE and _kubernetes_write(None, deletion) is None  # left alone
