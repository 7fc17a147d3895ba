"""The mutating admission webhook: AdmissionReview v1 in, a JSONPatch (or a denial) out, every decision kept."""

import base64
import json
from datetime import timedelta

import pytest
from django.utils import timezone

from scheduling.models import AdmissionDecision, Node, Orchestrator, Queue, Team, Workload
from scheduling.services.admission import MAX_BODY_BYTES
from tests.conftest import ADMISSION_TOKEN

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("admission_process")]

URL = "/admission/v1/mutate"


def pod(namespace="nlp", gpus=2, annotations=None, kind_annotation=""):
    notes = dict(annotations or {})
    if kind_annotation:
        notes["scheduler.gpuportal.io/kind"] = kind_annotation
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "p1", "namespace": namespace, **({"annotations": notes} if notes else {})},
        "spec": {"containers": [{"name": "c", "image": "x", "resources": {"limits": {"nvidia.com/gpu": gpus}}}]},
    }


def review(obj, namespace="nlp", api_version="admission.k8s.io/v1"):
    return {"apiVersion": api_version, "kind": "AdmissionReview", "request": {
        "uid": "u-1", "kind": {"group": "", "version": "v1", "kind": obj.get("kind", "")}, "namespace": namespace,
        "operation": "CREATE", "userInfo": {"username": "alice"}, "object": obj,
    }}


def pool_node(orchestrator, name="k0", **fields):
    """A node of ``orchestrator``'s pool carrying the pool label (the rebalancer's), so its selector can match."""
    return Node.objects.create(orchestrator=orchestrator, name=name, gpu_model="H100", gpu_total=8,
                               labels={"gpuportal.io/pool": orchestrator.name}, **fields)


@pytest.fixture
def k8s(queues):
    orchestrator = Orchestrator.objects.create(name="k8s-a", kind="kubernetes", endpoint="https://k8s.example")
    pool_node(orchestrator)
    return orchestrator


def post(client, body, token=ADMISSION_TOKEN):
    """The API server's call: the review, with the webhook's bearer token."""
    data = body if isinstance(body, bytes | str) else json.dumps(body)
    return client.post(URL, data=data, content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {token}")


def patch_of(response):
    answer = response.json()["response"]
    return {op["path"]: op["value"] for op in json.loads(base64.b64decode(answer["patch"]))}


def test_a_batch_pod_is_sent_to_volcano_on_the_pool_with_the_decision_annotated(client, k8s):
    response = post(client, review(pod()))
    assert response.status_code == 200
    answer = response.json()
    assert answer["apiVersion"] == "admission.k8s.io/v1" and answer["response"]["uid"] == "u-1"
    assert answer["response"]["allowed"] is True and answer["response"]["patchType"] == "JSONPatch"
    ops = patch_of(response)
    assert ops["/spec/schedulerName"] == "volcano"
    assert ops["/spec/nodeSelector"] == {"gpuportal.io/pool": "k8s-a"}
    assert ops["/spec/tolerations"] == [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    assert ops["/spec/priorityClassName"] == "gpuportal-batch"
    assert ops["/metadata/annotations"]["scheduler.gpuportal.io/decision"] == "volcano on k8s-a"
    decision = AdmissionDecision.objects.get()
    assert (decision.user, decision.namespace, decision.team.slug, decision.scheduler) == ("alice", "nlp", "nlp",
                                                                                            "volcano")


def test_on_a_cluster_without_volcano_batch_work_goes_to_the_default_scheduler_with_the_batch_priority(client, k8s):
    """A pod named for a scheduler the cluster does not run is never bound (the live fixture runs no Volcano)."""
    k8s.options = {"volcano": False}
    k8s.save()
    ops = patch_of(post(client, review(pod())))
    assert ops["/spec/schedulerName"] == "default-scheduler" and ops["/spec/priorityClassName"] == "gpuportal-batch"
    assert ops["/metadata/annotations"]["scheduler.gpuportal.io/decision"] == "default-scheduler on k8s-a"
    reasons = json.loads(ops["/metadata/annotations"]["scheduler.gpuportal.io/reasons"])
    assert reasons[-1] == "k8s-a runs no Volcano scheduler: default-scheduler with gpuportal-batch"
    explicit = patch_of(post(client, review(pod(annotations={"scheduler.gpuportal.io/scheduler": "volcano"}))))
    assert explicit["/spec/schedulerName"] == "default-scheduler"  # asking for it does not make it exist
    assert AdmissionDecision.objects.filter(scheduler="default-scheduler").count() == 2


def test_inference_of_a_team_granted_serving_goes_to_the_default_scheduler_and_annotations_are_kept(client, k8s):
    Team.objects.filter(slug="nlp").update(serving_kinds=["inference"])
    response = post(client, review(pod(kind_annotation="inference", annotations={"a/b": "c"})))
    ops = patch_of(response)
    assert ops["/spec/schedulerName"] == "default-scheduler"
    assert ops["/spec/priorityClassName"] == "gpuportal-serving"
    assert ops["/metadata/annotations/scheduler.gpuportal.io~1decision"] == "default-scheduler on k8s-a"
    assert "/metadata/annotations" not in ops


def test_an_explicit_scheduler_annotation_is_honoured_within_the_teams_entitlement(client, k8s):
    Team.objects.filter(slug="nlp").update(serving_kinds=["batch"])
    response = post(client, review(pod(annotations={"scheduler.gpuportal.io/scheduler": "default"})))
    assert patch_of(response)["/spec/schedulerName"] == "default-scheduler"
    response = post(client, review(pod(annotations={"scheduler.gpuportal.io/scheduler": "volcano"},
                                       kind_annotation="inference")))
    assert patch_of(response)["/spec/schedulerName"] == "volcano"  # asking for less is always allowed


@pytest.mark.parametrize("asks", [{"scheduler.gpuportal.io/scheduler": "default"},
                                  {"scheduler.gpuportal.io/kind": "inference"}])
def test_an_annotation_never_buys_the_serving_priority_it_is_lowered_with_the_reason(client, k8s, asks):
    """Issue 30, item 1: an 8-GPU batch pod annotated "default" got gpuportal-serving (2000) and preempted
    serving replicas. The team holds no serving entitlement: the pod runs as batch, and says why."""
    response = post(client, review(pod(gpus=8, annotations=asks)))
    assert response.json()["response"]["allowed"] is True
    ops = patch_of(response)
    assert ops["/spec/schedulerName"] == "volcano" and ops["/spec/priorityClassName"] == "gpuportal-batch"
    reasons = json.loads(ops["/metadata/annotations/scheduler.gpuportal.io~1reasons"])
    assert any("serving priority is not granted to team nlp" in r and "lowered to volcano" in r for r in reasons)
    assert AdmissionDecision.objects.get().scheduler == "volcano"


def test_with_escalation_denied_by_policy_a_pod_asking_beyond_its_entitlement_is_refused(client, k8s, settings):
    settings.GPUPORTAL_ADMISSION_ESCALATION = "deny"
    answer = post(client, review(pod(annotations={"scheduler.gpuportal.io/scheduler": "default"}))).json()["response"]
    assert answer["allowed"] is False and answer["status"]["code"] == 403
    assert "serving priority is not granted to team nlp for batch work" in answer["status"]["message"]
    assert post(client, review(pod())).json()["response"]["allowed"] is True  # plain batch work still runs


def test_a_sub_team_inherits_its_parents_serving_entitlement(client, k8s, teams):
    nlp = Team.objects.get(slug="nlp")
    nlp.serving_kinds = ["inference"]
    nlp.save()
    child = Team.objects.create(slug="nlp-serve", name="NLP serving", parent=nlp)
    Queue.objects.create(team=child, weight=10, guaranteed=0, burst_limit=8)
    response = post(client, review(pod(namespace="nlp-serve", kind_annotation="inference"), namespace="nlp-serve"))
    assert patch_of(response)["/spec/priorityClassName"] == "gpuportal-serving"


def test_serving_kinds_must_be_known_workload_kinds():
    from django.core.exceptions import ValidationError

    team = Team(slug="x", name="X", serving_kinds=["inference", "urgent"])
    with pytest.raises(ValidationError, match="urgent not one of training, hpo, inference, batch"):
        team.full_clean()


def test_a_job_is_patched_in_its_pod_template(client, k8s):
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j", "namespace": "nlp"},
           "spec": {"parallelism": 2, "template": pod()}}
    ops = patch_of(post(client, review(job)))
    assert ops["/spec/template/spec/schedulerName"] == "volcano"


def test_no_pool_selector_is_set_that_no_schedulable_node_carries(client, k8s):
    """Issue 30, item 4: on a fresh cluster no node carries gpuportal.io/pool until a rebalance labels some; a
    selector for it would leave every routed pod pending."""
    Node.objects.filter(name="k0").update(labels={}, state=Node.State.IDLE)
    response = post(client, review(pod()))
    ops = patch_of(response)
    assert ops["/spec/schedulerName"] == "volcano" and "/spec/nodeSelector" not in ops
    assert any("no schedulable node carries gpuportal.io/pool=k8s-a" in r
               for r in json.loads(ops["/metadata/annotations"]["scheduler.gpuportal.io/reasons"]))
    Node.objects.filter(name="k0").update(labels={"gpuportal.io/pool": "k8s-a"}, state=Node.State.DRAINED)
    assert "/spec/nodeSelector" not in patch_of(post(client, review(pod())))  # labelled, but takes no work
    Node.objects.filter(name="k0").update(state=Node.State.IDLE)
    assert patch_of(post(client, review(pod())))["/spec/nodeSelector"] == {"gpuportal.io/pool": "k8s-a"}


def test_a_team_without_gpu_quota_is_denied_with_what_to_request(client, k8s):
    Team.objects.create(slug="newteam", name="New team")
    answer = post(client, review(pod(namespace="newteam"), namespace="newteam")).json()["response"]
    assert answer["allowed"] is False
    assert "team newteam has no GPU quota on k8s-a: request quota for newteam" in answer["status"]["message"]
    assert AdmissionDecision.objects.get().allowed is False


def test_an_unknown_namespace_is_allowed_unchanged_with_the_reason_recorded(client, k8s):
    answer = post(client, review(pod(namespace="kube-system"), namespace="kube-system")).json()["response"]
    assert answer == {"uid": "u-1", "allowed": True}
    assert "maps to no team" in AdmissionDecision.objects.get().reasons[0]


def test_a_pod_without_gpus_is_allowed_unchanged(client, k8s):
    assert "patch" not in post(client, review(pod(gpus=0))).json()["response"]


@pytest.mark.parametrize(("body", "reason"), [
    (b"{not json", "not JSON"),
    (json.dumps({"kind": "AdmissionReview", "apiVersion": "admission.k8s.io/v1beta1", "request": {}}),
     "apiVersion must be admission.k8s.io/v1"),
    (json.dumps({"kind": "AdmissionReview", "apiVersion": "admission.k8s.io/v1", "request": {"object": {}}}),
     "request.uid must be a non-empty printable string"),
    (json.dumps([1, 2]), "expected an AdmissionReview"),
    (b"x" * (MAX_BODY_BYTES + 1), "over the"),
])
def test_a_body_that_is_no_review_is_a_400_admission_review_with_the_reason_and_never_recorded(client, k8s, body,
                                                                                                reason):
    response = post(client, body)
    answer = response.json()
    assert response.status_code == 400 and answer["kind"] == "AdmissionReview"
    assert answer["response"]["allowed"] is False and reason in answer["response"]["status"]["message"]
    assert not AdmissionDecision.objects.exists()


@pytest.mark.parametrize(("change", "reason"), [
    (lambda r: r["request"].pop("object"), "request.object must be an object"),
    (lambda r: r["request"].update(userInfo=["alice"]), "request.userInfo must be an object"),
    (lambda r: r["request"]["object"].update(metadata="x"), "request.object.metadata must be an object"),
    (lambda r: r["request"]["object"]["spec"].update(containers={"name": "c"}), "spec.containers must be a list"),
    (lambda r: r["request"]["object"]["spec"]["containers"][0].update(resources=[1]),
     "spec.containers[0].resources must be an object"),
    (lambda r: r["request"]["object"]["metadata"].update(annotations={"scheduler.gpuportal.io/kind": "urgent"}),
     "scheduler.gpuportal.io/kind must be one of training, hpo, inference, batch"),
    (lambda r: r["request"]["object"]["metadata"].update(labels={"a": ["b"]}), "metadata.labels must be an object"),
    (lambda r: r["request"].update(namespace=["nlp"]), "request.namespace must be a string"),
])
def test_a_malformed_review_is_refused_by_an_admission_review_naming_the_field(client, k8s, change, reason):
    body = review(pod())
    change(body)
    response = post(client, body)
    assert response.status_code == 200
    answer = response.json()["response"]
    assert answer["uid"] == "u-1" and answer["allowed"] is False and answer["status"]["code"] == 400
    assert reason in answer["status"]["message"]
    assert not AdmissionDecision.objects.exists()


def test_a_nul_in_the_user_and_names_is_stored_as_a_replacement_character(client, k8s):
    body = review(pod(namespace="kube-system"), namespace="kube-system")
    body["request"]["userInfo"]["username"] = "eve\x00admin"
    body["request"]["object"]["metadata"]["name"] = "p\x00"
    assert post(client, body).json()["response"]["allowed"] is True
    decision = AdmissionDecision.objects.get()
    assert (decision.user, decision.name) == ("eve\ufffdadmin", "p\ufffd")


def test_only_post_is_answered(client):
    assert client.get(URL).status_code == 405


def test_the_caller_must_present_the_webhooks_token(client, k8s):
    assert post(client, review(pod()), token="wrong").status_code == 403
    response = client.post(URL, data=json.dumps(review(pod())), content_type="application/json")
    assert response.status_code == 403
    assert post(client, review(pod())).status_code == 200
    assert not AdmissionDecision.objects.filter(user="alice").count() > 1


def test_a_non_ascii_authorization_header_is_a_403_not_a_500(client, k8s):
    response = client.post(URL, data=json.dumps(review(pod())), content_type="application/json",
                           HTTP_AUTHORIZATION="Bearer t\u00e9st")
    assert response.status_code == 403


def test_without_token_or_client_ca_and_debug_off_the_webhook_is_closed(client, k8s, settings):
    settings.GPUPORTAL_ADMISSION_TOKEN = ""
    settings.GPUPORTAL_ADMISSION_CLIENT_CA = ""
    settings.DEBUG = False
    response = post(client, review(pod()))
    assert response.status_code == 403 and "closed" in response.json()["error"]
    assert not AdmissionDecision.objects.exists()
    settings.GPUPORTAL_ADMISSION_CLIENT_CA = "/etc/gpuportal/admission-client-ca/ca.crt"  # the listener checks
    assert post(client, review(pod()), token="").status_code == 200


def test_the_portals_web_port_does_not_serve_the_webhook(client, k8s, settings):
    settings.ROOT_URLCONF = "gpuportal.urls"
    assert post(client, review(pod())).status_code == 404
    assert not AdmissionDecision.objects.exists()


def test_a_dry_run_is_answered_the_same_and_recorded_nowhere(client, k8s):
    """The webhook declares sideEffects: None, so a server-side dry run must leave no decision row."""
    body = review(pod())
    body["request"]["dryRun"] = True
    response = post(client, body)
    assert response.status_code == 200 and patch_of(response)["/spec/schedulerName"] == "volcano"
    assert not AdmissionDecision.objects.exists()


def test_a_priority_filled_in_before_the_webhook_is_removed_with_the_new_class(client, k8s):
    # The API server's Priority plugin runs first and writes the number of the pod's old class; it refuses
    # a pod whose number disagrees with the class the webhook sets.
    obj = pod()
    obj["spec"]["priority"] = 0
    ops = json.loads(base64.b64decode(post(client, review(obj)).json()["response"]["patch"]))
    assert {"op": "remove", "path": "/spec/priority"} in ops
    assert "/spec/priority" not in patch_of(post(client, review(pod())))


def test_a_teams_pod_it_cannot_route_is_allowed_but_annotated_so_it_never_reads_as_bypassed(client, k8s):
    response = post(client, review(pod(annotations={"scheduler.gpuportal.io/duration": "soon"})))
    answer = response.json()["response"]
    assert answer["allowed"] is True
    ops = patch_of(response)
    assert ops["/metadata/annotations/scheduler.gpuportal.io~1decision"].startswith("not routed: --time 'soon'")
    assert all(path.startswith("/metadata/annotations/") for path in ops)  # nothing else of the pod is changed
    assert AdmissionDecision.objects.get().reasons[0].startswith("not routed")


@pytest.fixture
def two_pools(queues, teams):
    """k8s-a (the default by name) is full until its one job ends in ~2 h; k8s-b has a free node."""
    busy, free = (Orchestrator.objects.create(name=name, kind="kubernetes", endpoint=f"https://{name}.example")
                  for name in ("k8s-a", "k8s-b"))
    pool_node(busy, "a0", gpu_allocated=8, state=Node.State.ALLOCATED)
    pool_node(free, "b0", state=Node.State.IDLE)
    started = timezone.now() - timedelta(hours=1)
    Workload.objects.create(orchestrator=busy, external_id="prod/pod/serve", team=teams["production"],
                            gpus_per_member=8, state=Workload.State.RUNNING, submitted_at=started, started_at=started,
                            duration_estimate_s=3 * 3600, nodes=["a0"])
    return busy, free


def test_with_two_pools_the_pod_goes_where_it_starts_first_and_the_reasons_name_both_waits(client, two_pools):
    response = post(client, review(pod()))
    ops = patch_of(response)
    assert ops["/spec/nodeSelector"] == {"gpuportal.io/pool": "k8s-b"}
    assert ops["/metadata/annotations"]["scheduler.gpuportal.io/decision"] == "volcano on k8s-b"
    reasons = json.loads(ops["/metadata/annotations"]["scheduler.gpuportal.io/reasons"])
    assert any(r.startswith("k8s-b: starts now") for r in reasons)
    assert any(r.startswith("k8s-a: starts in ~2.0 h") for r in reasons)
    decision = AdmissionDecision.objects.get()
    assert decision.pool == "k8s-b" and "k8s-b: predicted to start first" in decision.reasons


def test_admissions_against_the_same_snapshots_share_one_plan_and_a_new_snapshot_starts_another(client, two_pools):
    from django.core.cache import cache

    from scheduling.services import admission

    assert patch_of(post(client, review(pod())))["/spec/nodeSelector"] == {"gpuportal.io/pool": "k8s-b"}
    shared = admission._held.plans[1]
    assert patch_of(post(client, review(pod())))["/spec/nodeSelector"] == {"gpuportal.io/pool": "k8s-b"}
    assert admission._held.plans[1] is shared  # the second admission peeked at the first one's passes
    Node.objects.filter(name="b0").update(gpu_allocated=8, state=Node.State.ALLOCATED)
    Node.objects.filter(name="a0").update(gpu_allocated=0, state=Node.State.IDLE)
    Workload.objects.update(state=Workload.State.COMPLETED)
    cache.clear()  # the next collection round's snapshot
    assert patch_of(post(client, review(pod())))["/spec/nodeSelector"] == {"gpuportal.io/pool": "k8s-a"}
    assert admission._held.plans[1] is not shared


def test_with_two_pools_free_alike_the_default_pool_is_kept(client, two_pools):
    Node.objects.filter(name="a0").update(gpu_allocated=0, state=Node.State.IDLE)
    Workload.objects.update(state=Workload.State.COMPLETED)
    assert patch_of(post(client, review(pod())))["/spec/nodeSelector"] == {"gpuportal.io/pool": "k8s-a"}


def test_decisions_are_kept_for_a_bounded_time_pass_throughs_the_shortest(client, k8s, settings):
    """Issue 30, item 6: a row per pod created, non-GPU pods included, was kept forever."""
    from scheduling.services.admission import prune_decisions

    post(client, review(pod(gpus=0)))  # a pass-through
    post(client, review(pod()))  # routed
    now = timezone.now()
    assert prune_decisions(now + timedelta(hours=23)) == 0
    assert prune_decisions(now + timedelta(hours=25)) == 1
    assert AdmissionDecision.objects.get().patched is True
    assert prune_decisions(now + timedelta(days=settings.GPUPORTAL_ADMISSION_RETENTION_DAYS, hours=1)) == 1
    assert not AdmissionDecision.objects.exists()
