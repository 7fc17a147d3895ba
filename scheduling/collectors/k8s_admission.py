"""Which pods the API server would have sent to the portal's admission webhook, so that only those can be
"admission bypassed" (docs/routing.md).

A pod is sent when one webhook of the MutatingWebhookConfiguration has a rule for CREATE of core/v1 ``pods``
(the API server's ``rules.Matcher``: ``*`` wildcards, ``resource/subresource`` split, ``scope``), its
namespace's labels match the ``namespaceSelector`` and its own labels the ``objectSelector``. Labels are read
now, not as they were at creation: a pod or namespace relabelled since is judged by its labels today.
``matchConditions`` (CEL) are not evaluated; the portal's configuration has none.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from scheduling.engine.label_selector import LabelSelector, selector

from . import k8s_wire as wire
from .errors import SourceUnavailable

CREATE = "CREATE"
# A pod's creation as the API server matches it against a rule: group, version, resource, no subresource.
POD_GROUP, POD_VERSION, POD_RESOURCE = "", "v1", "pods"
# A pod is namespaced: rules scoped to "Cluster" never see it; any other scope value matches nothing.
POD_SCOPES = frozenset({"*", "Namespaced"})


def _listed(value: str, allowed: Iterable[str]) -> bool:
    return any(item in ("*", value) for item in allowed)


def _names_pods(resource: str) -> bool:
    # "pods/*" and "*/*" also cover the pod itself: the API server's "*" subresource matches none ("").
    name, _, subresource = resource.partition("/")
    return name in ("*", POD_RESOURCE) and subresource in ("*", "")


def covers_pod_creation(rule: wire.WebhookRule) -> bool:
    return (
        rule.scope in POD_SCOPES
        and _listed(CREATE, rule.operations)
        and _listed(POD_GROUP, rule.apiGroups)
        and _listed(POD_VERSION, rule.apiVersions)
        and any(_names_pods(resource) for resource in rule.resources)
    )


def _selector(wired: wire.LabelSelector) -> LabelSelector:
    expressions = ((e.key, e.operator, e.values) for e in wired.matchExpressions)
    return selector(wired.matchLabels, expressions)


@dataclass(frozen=True, slots=True)
class WebhookScope:
    """One webhook that is sent pod creations, narrowed by its two selectors."""

    namespaces: LabelSelector
    objects: LabelSelector

    def sends(self, namespace_labels: Mapping[str, str], pod_labels: Mapping[str, str]) -> bool:
        return self.namespaces.matches(namespace_labels) and self.objects.matches(pod_labels)


def pod_scopes(config: wire.WebhookConfiguration) -> tuple[WebhookScope, ...]:
    """The configuration's webhooks that are sent pod creations. Raises ``SelectorError`` for a selector the
    API server would refuse, even one of a webhook not sent pods: the configuration is then not understood."""
    scopes = [(hook, WebhookScope(_selector(hook.namespaceSelector), _selector(hook.objectSelector)))
              for hook in config.webhooks]
    return tuple(scope for hook, scope in scopes if any(covers_pod_creation(rule) for rule in hook.rules))


@dataclass(frozen=True, slots=True)
class Admission:
    """What "admission bypassed" is judged by in one round: since when the webhook is registered (epoch
    seconds), which pods its webhooks are sent, and the labels of every namespace (by name)."""

    since: float
    webhooks: tuple[WebhookScope, ...]
    namespace_labels: Mapping[str, Mapping[str, str]]

    def sent(self, pod: wire.Pod) -> bool:
        labels = self.namespace_labels.get(pod.metadata.namespace)
        # A namespace listed after the pods and gone by then cannot be judged: no finding rather than a false one.
        if labels is None:
            return False
        return any(hook.sends(labels, pod.metadata.labels) for hook in self.webhooks)


BYPASS_LABEL = "gpuportal.io/admission-bypassed"
BYPASS_REASON_ANNOTATION = "scheduler.gpuportal.io/bypass-action"


class BypassActions:
    """What an admin chose to do with pods that bypassed admission on one cluster (the orchestrator's
    ``admission_bypass`` option): label them for the next round (``gpuportal.io/admission-bypassed=true``), or
    evict them, saying why in an annotation first (the eviction API carries no message; a controller re-creates
    the pod through the webhook). Each returns what it did, or raises ``SourceUnavailable``."""

    def __init__(self, api_client: k8s.ApiClient) -> None:
        self.core = k8s.CoreV1Api(api_client)

    def label(self, namespace: str, pod: str, message: str) -> str:
        patch = {"metadata": {"labels": {BYPASS_LABEL: "true"}, "annotations": {BYPASS_REASON_ANNOTATION: message}}}
        self._call("label pod", self.core.patch_namespaced_pod, pod, namespace, patch)
        return f"labelled {BYPASS_LABEL}=true"

    def evict(self, namespace: str, pod: str, message: str) -> str:
        self.label(namespace, pod, message)
        eviction = k8s.V1Eviction(metadata=k8s.V1ObjectMeta(name=pod, namespace=namespace))
        self._call("evict pod", self.core.create_namespaced_pod_eviction, pod, namespace, eviction)
        return "evicted"

    @staticmethod
    def _call(what: str, call, *args) -> None:  # type: ignore[no-untyped-def]
        try:
            call(*args)
        except ApiException as exc:
            raise SourceUnavailable(f"kubernetes: {what}: HTTP {exc.status} {exc.reason}", status=exc.status) from exc
