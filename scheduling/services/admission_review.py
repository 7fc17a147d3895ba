"""Reading an AdmissionReview v1 without trusting its shape.

The API server only sends well-formed reviews, but the webhook's port can be reached by whatever else reaches
the admission process, and a review is JSON: any field may be a list where a string belongs, an object nested
a thousand deep, a string with NUL bytes. Every field the webhook reads is checked here, before any decision,
so a malformed review is answered with an AdmissionReview naming the field and the rule (``BadReview``), never
with a server error halfway through a decision.
"""

from __future__ import annotations

import json

from scheduling.engine.submissions import GPU_RESOURCE, KIND_ANNOTATION
from scheduling.engine.types import WorkloadKind

API_VERSION = "admission.k8s.io/v1"
MAX_BODY_BYTES = 1_048_576
MAX_UID_CHARS = 128  # a Kubernetes UID is 36; the answer echoes it, so keep it short
KIND_VALUES = tuple(kind.value for kind in WorkloadKind)
KINDS = ", ".join(KIND_VALUES)


class BadReview(ValueError):
    """The body is not an AdmissionReview v1 this webhook can answer; the message says why. ``uid`` is the
    review's when it could be read (the answer then carries it, as the API server expects)."""

    def __init__(self, message: str, uid: str = "") -> None:
        super().__init__(message)
        self.uid = uid


def parse_review(body: bytes) -> dict:
    """The review's ``request`` (uid, object and the fields the webhook reads, all of the right type), or
    ``BadReview``."""
    if len(body) > MAX_BODY_BYTES:
        raise BadReview(f"body of {len(body)} bytes is over the {MAX_BODY_BYTES}-byte limit")
    try:
        review = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise BadReview(f"not JSON: {error}") from error
    except RecursionError as error:
        raise BadReview("not JSON this webhook reads: nested too deep") from error
    if not isinstance(review, dict) or review.get("kind") != "AdmissionReview":
        raise BadReview("expected an AdmissionReview object")
    if review.get("apiVersion") != API_VERSION:
        raise BadReview(f"apiVersion must be {API_VERSION}, got {str(review.get('apiVersion'))[:64]!r}")
    request = review.get("request")
    if not isinstance(request, dict):
        raise BadReview("request must be an object")
    uid = request.get("uid")
    if not isinstance(uid, str) or not uid or len(uid) > MAX_UID_CHARS or not uid.isprintable():
        raise BadReview(f"request.uid must be a non-empty printable string of at most {MAX_UID_CHARS} characters")
    try:
        check_request(request)
    except BadReview as error:
        raise BadReview(str(error), uid) from None
    return request


def check_request(request: dict) -> None:
    _optional(request, "request", "namespace", str)
    _optional(request, "request", "dryRun", bool)
    for name in ("userInfo", "kind"):
        _optional(request, "request", name, dict)
    _optional(request.get("userInfo") or {}, "request.userInfo", "username", str)
    _optional(request.get("kind") or {}, "request.kind", "kind", str)
    obj = request.get("object")
    if not isinstance(obj, dict):
        raise BadReview("request.object must be an object")
    _optional(obj, "request.object", "kind", str)
    check_metadata(obj.get("metadata"))
    _optional(obj, "request.object", "spec", dict)
    spec = obj.get("spec") or {}
    if obj.get("kind") == "Job" and "tasks" in spec:
        check_tasks(spec)
    elif obj.get("kind") == "Job":
        _optional(spec, "spec", "parallelism", int)
        _optional(spec, "spec", "template", dict)
        _optional(spec.get("template") or {}, "spec.template", "spec", dict)
        check_pod_spec((spec.get("template") or {}).get("spec") or {}, "spec.template.spec")
    elif obj.get("kind") == "Pod":
        check_pod_spec(spec, "spec")


def check_metadata(meta: object) -> None:
    if meta is None:
        return
    if not isinstance(meta, dict):
        raise BadReview("request.object.metadata must be an object")
    for name in ("name", "generateName", "namespace"):
        _optional(meta, "metadata", name, str)
    for name in ("labels", "annotations"):
        _string_map(meta, "metadata", name)
    kind = (meta.get("annotations") or {}).get(KIND_ANNOTATION)
    if kind is not None and kind not in KIND_VALUES:
        raise BadReview(f"annotation {KIND_ANNOTATION} must be one of {KINDS}, got {kind[:64]!r}")


def check_tasks(spec: dict) -> None:
    tasks = spec["tasks"]
    if not _list_of_objects(tasks):
        raise BadReview("spec.tasks must be a list of objects")
    for index, task in enumerate(tasks):
        where = f"spec.tasks[{index}]"
        _optional(task, where, "replicas", int)
        _optional(task, where, "template", dict)
        _optional(task.get("template") or {}, f"{where}.template", "spec", dict)
        check_pod_spec((task.get("template") or {}).get("spec") or {}, f"{where}.template.spec")


def check_pod_spec(spec: dict, where: str) -> None:
    _optional(spec, where, "activeDeadlineSeconds", int)
    _optional(spec, where, "priority", int)
    _string_map(spec, where, "nodeSelector")
    tolerations = spec.get("tolerations")
    if tolerations is not None and not _list_of_objects(tolerations):
        raise BadReview(f"{where}.tolerations must be a list of objects")
    containers = spec.get("containers")
    if containers is None:
        return
    if not _list_of_objects(containers):
        raise BadReview(f"{where}.containers must be a list of objects")
    for index, container in enumerate(containers):
        _optional(container, f"{where}.containers[{index}]", "resources", dict)
        resources = container.get("resources") or {}
        for name in ("requests", "limits"):
            _optional(resources, f"{where}.containers[{index}].resources", name, dict)
            quantity = (resources.get(name) or {}).get(GPU_RESOURCE)
            if quantity is not None and (isinstance(quantity, bool) or not isinstance(quantity, int | str)):
                raise BadReview(f"{where}.containers[{index}].resources.{name}[{GPU_RESOURCE}] must be a quantity")


def _list_of_objects(value: object) -> bool:
    return isinstance(value, list) and all(isinstance(item, dict) for item in value)


def _optional(parent: dict, where: str, name: str, kind: type) -> None:
    value = parent.get(name)
    # bool is an int in Python; JSON's true is not a number of replicas.
    if value is not None and (not isinstance(value, kind) or (kind is int and isinstance(value, bool))):
        raise BadReview(f"{where}.{name} must be {_NAMES[kind]}, got {type(value).__name__}")


def _string_map(parent: dict, where: str, name: str) -> None:
    value = parent.get(name)
    if value is None:
        return
    if not isinstance(value, dict) or not all(isinstance(item, str) for item in value.values()):
        raise BadReview(f"{where}.{name} must be an object of strings")


_NAMES = {str: "a string", bool: "true or false", dict: "an object", int: "a whole number", list: "a list"}
