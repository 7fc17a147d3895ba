"""The mutating admission webhook's decisions (AdmissionReview v1), every one recorded.

For a Pod, a batch/v1 or Volcano Job, or a PodGroup that asks for GPUs in a namespace that names a team:

* the scheduler: an explicit ``scheduler.gpuportal.io/scheduler`` annotation (volcano / default) wins;
  otherwise the engine's rules (``engine/routing.route``): serving work (inference, a latency SLA) goes to
  the default scheduler, everything else (gangs, training, batch) to Volcano;
* the pool: with several Kubernetes pools, the one where the pod is predicted to start first (the engine's
  backfill over each pool's snapshot, the team's cap there), every candidate's wait in the reasons;
* the patch sets ``schedulerName``, the pool's nodeSelector (``gpuportal.io/pool``), a toleration for the
  GPU taint, a priorityClass by queue (``gpuportal-serving`` / ``gpuportal-batch``) and annotations carrying
  the decision and its reasons;
* a pool whose cluster runs no Volcano (orchestrator option ``volcano: false``) gets its batch work on the default
  scheduler, still with ``gpuportal-batch``: a pod named for an absent scheduler is never bound;
* a team without GPU quota (no any-model queue with a burst limit) is denied, with what to request;
* the serving scheduler and priority (``gpuportal-serving``) only for the kinds of work an admin granted the
  team (``Team.serving_kinds``, inherited by sub-teams): a pod whose annotations ask for more is lowered to
  Volcano with the batch priority, the reason in its annotations, or denied when
  ``GPUPORTAL_ADMISSION_ESCALATION`` is ``deny``. An annotation never buys priority.

Everything else is allowed unchanged, with the reason recorded: an unknown namespace, an object without
GPUs, a kind the router does not handle. A body that is not an AdmissionReview v1, or whose fields have the
wrong shape, raises ``BadReview`` (``admission_review``: the view answers with an AdmissionReview that refuses it
and says why). The webhook's failurePolicy and timeout belong to the MutatingWebhookConfiguration: ``Ignore``
and 2 s by default (a pod is never blocked by the portal being down; ``Fail`` when routing must be enforced).
"""

from __future__ import annotations

import base64
import json
import re
import threading
from dataclasses import dataclass, field, replace
from datetime import timedelta

from django.conf import settings
from django.utils import timezone

from scheduling.collectors.k8s_wire import DECISION_ANNOTATION
from scheduling.engine.governance_types import PRIORITY_CLASSES as GOVERNED_PRIORITY_CLASSES
from scheduling.engine.routing import earliest_pool, route
from scheduling.engine.startplan import PoolSnapshot, StartPlans
from scheduling.engine.submissions import SCHEDULER_ANNOTATION, TEAM_LABEL, describe_object
from scheduling.engine.types import OrchestratorKind, Request
from scheduling.models import AdmissionDecision, Team
from scheduling.selectors.routing import submission_request
from scheduling.selectors.workloads import cached_pool_snapshots

from .admission_directory import directory
from .admission_log import decisions
from .admission_review import API_VERSION, MAX_BODY_BYTES, BadReview, parse_review  # noqa: F401 (the view's)

POOL_LABEL = "gpuportal.io/pool"
REASONS_ANNOTATION = "scheduler.gpuportal.io/reasons"
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
VOLCANO, DEFAULT = "volcano", "default-scheduler"
EXPLICIT = {"volcano": VOLCANO, "default": DEFAULT, "default-scheduler": DEFAULT, "kubernetes": DEFAULT}
# Governance creates and keeps these classes on every Kubernetes cluster (engine.governance_types).
PRIORITY_CLASSES = {VOLCANO: "gpuportal-batch", DEFAULT: "gpuportal-serving"}
assert set(PRIORITY_CLASSES.values()) == set(GOVERNED_PRIORITY_CLASSES)  # a typo fails at import
ROUTED_KINDS = ("Pod", "Job", "PodGroup")


@dataclass(frozen=True)
class Outcome:
    allowed: bool
    message: str = ""
    scheduler: str = ""
    pool: str = ""
    patch: list[dict] = field(default_factory=list)
    reasons: tuple[str, ...] = ()
    team: Team | None = None


def review_response(request: dict, outcome: Outcome) -> dict:
    """The AdmissionReview v1 the API server expects back."""
    response: dict = {"uid": request["uid"], "allowed": outcome.allowed}
    if outcome.patch:
        response["patchType"] = "JSONPatch"
        response["patch"] = base64.b64encode(json.dumps(outcome.patch).encode()).decode()
    if outcome.message:
        response["status"] = {"code": 200 if outcome.allowed else 403, "message": outcome.message}
    return {"apiVersion": API_VERSION, "kind": "AdmissionReview", "response": response}


def refusal(error: BadReview) -> dict:
    """The AdmissionReview answering a malformed review: not allowed, code 400, the reason (with the review's
    uid when it could be read, so the API server can match it)."""
    response = {"uid": error.uid, "allowed": False, "status": {"code": 400, "message": f"malformed review: {error}"}}
    return {"apiVersion": API_VERSION, "kind": "AdmissionReview", "response": response}


_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")  # PostgreSQL text and jsonb refuse NUL and lone surrogates


def storable(value: object, limit: int) -> str:
    return _UNSTORABLE.sub("\ufffd", str(value))[:limit]


def admit(request: dict) -> Outcome:
    """Decide for one admission request and record the decision (``admission_log``: batched off the request path on
    PostgreSQL); a dry run (``kubectl --dry-run=server``) is answered the same and recorded nowhere, as the
    webhook's ``sideEffects: None`` promises."""
    outcome = decide(request)
    if request.get("dryRun"):
        return outcome
    obj = request["object"]
    meta = obj.get("metadata") or {}
    decisions.record(dict(
        at=timezone.now(), uid=storable(request["uid"], 64),
        user=storable((request.get("userInfo") or {}).get("username", ""), 253),
        namespace=storable(request.get("namespace") or meta.get("namespace") or "", 253),
        name=storable(meta.get("name") or meta.get("generateName") or "", 253), kind=storable(obj.get("kind", ""), 64),
        team_id=outcome.team.pk if outcome.team else None, allowed=outcome.allowed, patched=bool(outcome.patch),
        scheduler=outcome.scheduler, pool=outcome.pool, message=storable(outcome.message, 500),
        reasons=[storable(reason, 1000) for reason in outcome.reasons], bypassed=False,
    ))
    return outcome


def prune_decisions(now) -> int:
    """Decisions are kept for a bounded time: a pass-through (no team, no GPUs, nothing patched) for
    ``GPUPORTAL_ADMISSION_PASSTHROUGH_HOURS``, every other answer and bypass finding for
    ``GPUPORTAL_ADMISSION_RETENTION_DAYS``. Before, a row per pod created, non-GPU pods included, forever."""
    passthrough = now - timedelta(hours=settings.GPUPORTAL_ADMISSION_PASSTHROUGH_HOURS)
    kept_until = now - timedelta(days=settings.GPUPORTAL_ADMISSION_RETENTION_DAYS)
    plain = AdmissionDecision.objects.filter(at__lt=passthrough, allowed=True, patched=False, bypassed=False)
    deleted, _ = plain.delete()
    old, _ = AdmissionDecision.objects.filter(at__lt=kept_until).delete()
    return deleted + old


def decide(request: dict) -> Outcome:
    obj = request["object"]
    kind = obj.get("kind") or (request.get("kind") or {}).get("kind", "")
    if kind not in ROUTED_KINDS:
        return Outcome(True, reasons=(f"{kind or 'an object without a kind'} is not routed",))
    meta = obj.get("metadata") or {}
    namespace = request.get("namespace") or meta.get("namespace") or ""
    known = directory()
    # A namespace mapped to a team is the team's: a pod there cannot claim another team by its label.
    slug = known.namespaces.get(namespace) or (meta.get("labels") or {}).get(TEAM_LABEL) or namespace
    team = known.teams.get(slug)
    if team is None:
        return Outcome(True, reasons=(f"namespace {namespace!r} maps to no team: allowed unchanged",))
    try:
        # The object's kind may come from the request alone; a PodGroup is described as one pod without a spec.
        shown = {**obj, "kind": kind} if kind != "PodGroup" else {**obj, "kind": "Pod", "spec": {}}
        description = describe_object(shown)
    except ValueError as error:
        # Annotated all the same: a team's pod without the decision annotation reads as "admission bypassed".
        reasons = (f"not routed: {error}",)
        return Outcome(True, reasons=reasons, team=team, patch=_annotate(obj, f"not routed: {error}"[:200], reasons))
    if kind != "PodGroup" and description.gpus_per_member < 1:
        return Outcome(True, reasons=("requests no GPUs: allowed unchanged",), team=team)
    pools = known.pools
    if team.pk not in known.with_quota:
        default = next(iter(pools.values()), "")
        return Outcome(False, f"team {team.slug} has no GPU quota on {default or 'Kubernetes'}: request quota for "
                       f"{team.slug} in the portal (Quota requests → New) before submitting GPU work",
                       pool=default, reasons=("no GPU quota",), team=team)
    scheduler, reasons = _scheduler_for(description, meta.get("annotations") or {})
    if scheduler == DEFAULT and description.kind not in known.serving.get(team.pk, ()):
        beyond = (f"serving priority is not granted to team {team.slug} for {description.kind} work "
                  f"(an admin allows it per team and kind)")
        if settings.GPUPORTAL_ADMISSION_ESCALATION == "deny":
            return Outcome(False, f"{beyond}: denied; submit it as batch work (no scheduler annotation) or ask an "
                           "admin for the entitlement", scheduler=scheduler, reasons=(*reasons, beyond), team=team)
        scheduler, reasons = VOLCANO, (*reasons, f"{beyond}: lowered to {VOLCANO} with {PRIORITY_CLASSES[VOLCANO]}")
    pool, pool_reasons = _pool_for(replace(submission_request(description), team=team.slug), pools)
    reasons = (*reasons, *pool_reasons)
    priority_class = PRIORITY_CLASSES[scheduler]  # the entitlement's: kept when the scheduler changes below
    if scheduler == VOLCANO and pool in known.without_volcano:
        # Nothing would ever bind it: the default scheduler places it, with the batch priority all the same.
        scheduler, reasons = DEFAULT, (*reasons, f"{pool} runs no Volcano scheduler: {DEFAULT} with {priority_class}")
    if pool and pool not in known.labelled:
        # A selector no schedulable node carries would leave the pod pending forever: route it, unpinned.
        reasons = (*reasons, f"no schedulable node carries {POOL_LABEL}={pool} yet: no pool selector set")
        pool = ""
    return Outcome(True, scheduler=scheduler, pool=pool, reasons=reasons, team=team,
                   patch=_patch(kind, obj, scheduler, priority_class, pool, reasons))


def _scheduler_for(description, annotations: dict) -> tuple[str, tuple[str, ...]]:
    explicit = annotations.get(SCHEDULER_ANNOTATION, "")
    if explicit in EXPLICIT:
        return EXPLICIT[explicit], (f"explicitly requested {explicit}",)
    request = replace(submission_request(description), orchestrator="")
    ruled = route(request, available={kind.value for kind in OrchestratorKind})
    scheduler = DEFAULT if ruled.rule == "serving" else VOLCANO
    reasons = [*ruled.reasons, f"{'service' if scheduler == DEFAULT else 'batch'} work: {scheduler}"]
    if explicit:
        reasons.insert(0, f"unknown scheduler annotation {explicit!r} ignored")
    return scheduler, tuple(reasons)


def _pool_for(request: Request, pools: dict[int, str]) -> tuple[str, tuple[str, ...]]:
    """The pool where the pod is predicted to start first (``engine.routing.earliest_pool`` over each pool's
    snapshot, cached per collection round), with every candidate's wait; with one pool, that pool."""
    if len(pools) < 2:
        return next(iter(pools.values()), ""), ()
    now = timezone.now()
    snapshots = cached_pool_snapshots(now, set(pools))
    candidates = [snapshots[pk] for pk in pools if pk in snapshots]
    plans = start_plans(candidates, now.timestamp())
    decision = earliest_pool(request, candidates, now=plans.now, plans=plans)
    return decision.orchestrator, decision.reasons


_held = threading.local()  # this thread's StartPlans and the snapshots they answer for


def start_plans(snapshots: list[PoolSnapshot], now: float) -> StartPlans:
    """One ``StartPlans`` per set of cached pool snapshots, per thread: every admission against the same
    snapshots (``SNAPSHOT_TTL_S`` at most) shares each pool's stopped backfill passes, so a decision costs a
    peek, not a pass over the queue. Their moment is the first of those admissions (a snapshot already pictures
    the pools as they were read); a new snapshot starts new plans. Per thread because a peek uses the pass's
    shadow state (gunicorn's threads would share it otherwise)."""
    held = getattr(_held, "plans", None)
    same = held is not None and len(held[0]) == len(snapshots) \
        and all(a is b for a, b in zip(held[0], snapshots, strict=True))
    if not same:
        held = _held.plans = (tuple(snapshots), StartPlans(now))
    return held[1]


def _patch(
    kind: str, obj: dict, scheduler: str, priority_class: str, pool: str, reasons: tuple[str, ...]
) -> list[dict]:
    """JSONPatch ops: annotations on the object; scheduling fields on the pod spec (a Job's template)."""
    ops = _annotate(obj, f"{scheduler} on {pool or 'any pool'}", reasons)
    if kind == "PodGroup":
        return ops
    if kind == "Job" and "tasks" in (obj.get("spec") or {}):
        ops.append({"op": "add", "path": "/spec/schedulerName", "value": scheduler})
        return ops  # Volcano Job: its controller sets each task pod's scheduler from spec.schedulerName
    base = "/spec" if kind == "Pod" else "/spec/template/spec"
    spec = obj.get("spec") or {}
    if kind == "Job":
        spec = (spec.get("template") or {}).get("spec") or {}
    ops.append({"op": "add", "path": f"{base}/schedulerName", "value": scheduler})
    ops.append({"op": "add", "path": f"{base}/priorityClassName", "value": priority_class})
    if "priority" in spec:
        # The Priority plugin ran before us and filled in the old class's number; the API server refuses a
        # pod whose number disagrees with its class, so drop it and let the server resolve the new class.
        ops.append({"op": "remove", "path": f"{base}/priority"})
    if pool:
        ops += _merge_map(f"{base}/nodeSelector", spec.get("nodeSelector"), {POOL_LABEL: pool})
    tolerations = spec.get("tolerations")
    if not tolerations:
        ops.append({"op": "add", "path": f"{base}/tolerations", "value": [GPU_TOLERATION]})
    elif GPU_TOLERATION not in tolerations:
        ops.append({"op": "add", "path": f"{base}/tolerations/-", "value": GPU_TOLERATION})
    return ops


def _annotate(obj: dict, decision: str, reasons: tuple[str, ...]) -> list[dict]:
    notes = {DECISION_ANNOTATION: decision, REASONS_ANNOTATION: json.dumps(reasons)}
    return _merge_map("/metadata/annotations", (obj.get("metadata") or {}).get("annotations"), notes)


def _merge_map(path: str, existing: dict | None, values: dict[str, str]) -> list[dict]:
    if not existing:
        return [{"op": "add", "path": path, "value": values}]
    return [{"op": "add", "path": f"{path}/{key.replace('~', '~0').replace('/', '~1')}", "value": value}
            for key, value in values.items()]
