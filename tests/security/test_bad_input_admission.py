"""Issue 29, item 1: the admission webhook answers every malformed review with an AdmissionReview, never a 500.

A few thousand reviews, each a well-formed one (a Pod, a batch Job, a Volcano Job, a PodGroup of a team with
quota) with one field replaced by any JSON value (lists where strings belong, objects nested deep, NUL bytes,
lone surrogates, huge numbers) or removed, plus raw bodies that are no JSON at all. Before the shape checks of
``services/admission_review.py``, a third of such reviews answered 500 (the audit's 1,853 of 5,938)."""

import copy
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scheduling.models import Orchestrator
from tests.api.test_admission import URL, pod, review
from tests.conftest import ADMISSION_TOKEN

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("admission_process")]

FUZZ = settings(max_examples=1200, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])

text = st.text(alphabet=st.characters(codec=None, exclude_categories=()), max_size=12) | st.sampled_from(
    ["\x00", "nlp\x00", "\ud800", "default", "volcano", "inference", "Pod", "Job", "nvidia.com/gpu", "-1", "1e400"])
leaves = st.none() | st.booleans() | st.integers(min_value=-(10**30), max_value=10**30) | st.floats() | text
json_values = st.recursive(leaves, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(text, inner, max_size=3),
                           max_leaves=8)


def samples() -> list[dict]:
    gpu_pod = pod(annotations={"scheduler.gpuportal.io/scheduler": "default"}, kind_annotation="training")
    gpu_pod["metadata"]["labels"] = {"scheduler.gpuportal.io/team": "nlp"}
    gpu_pod["spec"].update(nodeSelector={"a": "b"}, tolerations=[{"key": "k"}], priority=0, activeDeadlineSeconds=60)
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j", "namespace": "nlp"},
           "spec": {"parallelism": 2, "template": pod()}}
    volcano = {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": {"name": "v", "namespace": "nlp"},
               "spec": {"tasks": [{"replicas": 2, "template": pod()}]}}
    group = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup", "metadata": {"name": "g"},
             "spec": {"minMember": 2}}
    reviews = [review(obj) for obj in (gpu_pod, job, volcano, group)]
    reviews[0]["request"]["dryRun"] = False
    return reviews


def paths(value, prefix=()) -> list[tuple]:
    found = [prefix] if prefix else []
    children = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, child in children:
        found += paths(child, (*prefix, key))
    return found


SAMPLES = samples()
PLACES = [(index, path) for index, sample in enumerate(SAMPLES) for path in paths(sample)]


def mutated(place: tuple, value, remove: bool) -> dict:
    index, path = place
    body = copy.deepcopy(SAMPLES[index])
    parent = body
    for key in path[:-1]:
        parent = parent[key]
    if remove and isinstance(parent, dict):
        del parent[path[-1]]
    else:
        parent[path[-1]] = value
    return body


def answer_of(client, data: bytes):
    response = client.generic("POST", URL, data, content_type="application/json",
                              HTTP_AUTHORIZATION=f"Bearer {ADMISSION_TOKEN}")
    assert response.status_code < 500, (data[:300], response.content[:300])
    assert response.json()["kind"] == "AdmissionReview", response.content[:300]
    return response


@pytest.fixture
def pool(queues):
    Orchestrator.objects.create(name="k8s-a", kind="kubernetes", endpoint="https://k8s.example")


@FUZZ
@given(place=st.sampled_from(PLACES), value=json_values, remove=st.booleans())
def test_a_review_with_any_field_replaced_is_answered_by_an_admission_review(client, pool, place, value, remove):
    response = answer_of(client, json.dumps(mutated(place, value, remove)).encode())
    if response.status_code == 200:
        assert response.json()["response"]["uid"]


@FUZZ
@given(place=st.sampled_from(PLACES), depth=st.integers(min_value=1, max_value=3000), opener=st.sampled_from("[{"))
def test_a_field_nested_deep_is_answered_by_an_admission_review(client, pool, place, depth, opener):
    nest = "[" * depth + "]" * depth if opener == "[" else '{"a":' * depth + "1" + "}" * depth
    body = json.dumps(mutated(place, "NEST", False)).replace('"NEST"', nest)
    answer_of(client, body.encode())


@settings(max_examples=600, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(body=st.binary(max_size=200) | json_values.map(lambda v: json.dumps(v).encode()))
def test_a_body_that_is_no_review_is_answered_by_an_admission_review(client, pool, body):
    answer_of(client, body)

