"""Where should a workload go, and why: one answer for the API (``POST /api/v1/route``) and for
``manage.py route FILE`` (a pod / Job / Volcano Job YAML or an sbatch script).

``route_workload`` builds each enabled scheduler pool's snapshot (``selectors.workloads.pool_snapshots``:
nodes, queue, running work, team caps), keyed by orchestrator kind, and asks the engine's
``route_by_start`` for the pool where the workload is predicted to start first; an explicit scheduler
(annotation ``scheduler.gpuportal.io/scheduler`` or the API's ``scheduler``) is honoured when that kind is
offered. With several orchestrators of one kind, the one with the most GPUs stands for the kind.
The calendar floors of pool policies are not yet read (``PoolSnapshot.not_before`` stays 0).

The parsers are pure functions from text to a ``WorkloadDescription``; they raise ``ValueError`` with
the line or field at fault.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from datetime import datetime

import yaml
from django.db.models import Sum
from django.utils import timezone

from scheduling.engine.routing import route_by_start
from scheduling.engine.startplan import StartPlans
from scheduling.engine.types import Request, WorkloadKind
from scheduling.models import Orchestrator
from scheduling.selectors.engine_inputs import described_request
from scheduling.selectors.workloads import pool_snapshots

SCHEDULER_ANNOTATION = "scheduler.gpuportal.io/scheduler"
TEAM_LABEL = "scheduler.gpuportal.io/team"
KIND_ANNOTATION = "scheduler.gpuportal.io/kind"
DURATION_ANNOTATION = "scheduler.gpuportal.io/duration"
GPU_RESOURCE = "nvidia.com/gpu"
# Leave the rule's choice only to start at least an hour sooner, and only for work that ends within 4 h:
# uncapped start-first routing made Philly's waits ten times worse (docs/routing.md).
MIN_GAIN_S = 3600.0
GUEST_MAX_S = 4 * 3600.0
# What a scheduler annotation may name, as the orchestrator kind that runs it.
SCHEDULER_NAMES = {
    "slurm": "slurm", "kubernetes": "kubernetes", "k8s": "kubernetes", "volcano": "kubernetes",
    "default": "kubernetes", "default-scheduler": "kubernetes", "ray": "ray",
}


@dataclass(frozen=True)
class WorkloadDescription:
    """What the router needs to know about a submission, whatever it was written in."""

    gpus_per_member: int = 1
    members: int = 1
    duration_s: float = 0.0
    team: str = ""
    kind: str = WorkloadKind.BATCH.value
    scheduler: str = ""
    latency_sla_ms: float | None = None
    source: str = ""

    def request(self) -> Request:
        return described_request(
            members=self.members, gpus_per_member=self.gpus_per_member, team=self.team, kind=self.kind,
            duration_s=self.duration_s, orchestrator=SCHEDULER_NAMES.get(self.scheduler, self.scheduler),
            latency_sla_ms=self.latency_sla_ms,
        )


@dataclass(frozen=True)
class Candidate:
    pool: str
    kind: str
    predicted_wait_s: float | None
    position: int
    basis: str


@dataclass(frozen=True)
class RouteAnswer:
    orchestrator: str
    """The orchestrator kind chosen ("" when none is enabled)."""
    pool: str
    rule: str
    reasons: tuple[str, ...]
    candidates: tuple[Candidate, ...] = field(default=())


def route_workload(description: WorkloadDescription, *, now: datetime | None = None) -> RouteAnswer:
    """The engine's answer for ``description`` over the current snapshot of every enabled scheduler pool."""
    now = now or timezone.now()
    pools = _pool_per_kind()
    snapshots = pool_snapshots(now, set(pools.values()))
    by_kind = [replace(snapshots[pk], orchestrator=kind) for kind, pk in pools.items()]
    request = description.request()
    epoch = now.timestamp()
    plans = StartPlans(epoch)  # the decision's estimates are the candidates' too: one pass per pool
    decision = route_by_start(request, by_kind, now=epoch, min_gain_s=MIN_GAIN_S, guest_max_s=GUEST_MAX_S,
                              plans=plans)
    candidates = []
    for snapshot in by_kind:
        estimate = plans.estimate(request, snapshot)
        candidates.append(Candidate(snapshots[pools[snapshot.orchestrator]].orchestrator, snapshot.orchestrator,
                                    estimate.wait_s(epoch), estimate.position, estimate.basis))
    chosen = snapshots[pools[decision.orchestrator]].orchestrator if decision.orchestrator in pools else ""
    return RouteAnswer(decision.orchestrator, chosen, decision.rule, decision.reasons, tuple(candidates))


def _pool_per_kind() -> dict[str, int]:
    """For each scheduler kind, the enabled orchestrator with the most GPUs (its id)."""
    rows = (
        Orchestrator.objects.filter(enabled=True, kind__in=Orchestrator.SCHEDULER_KINDS)
        .annotate(gpus=Sum("nodes__gpu_total")).order_by("kind", "-gpus", "name")
        .values_list("kind", "pk")
    )
    chosen: dict[str, int] = {}
    for kind, pk in rows:
        chosen.setdefault(kind, pk)
    return chosen


# --- parsing submissions ------------------------------------------------------------------------------

_SBATCH = re.compile(r"^#SBATCH\s+(.*)$")


def describe_file(text: str, name: str = "") -> WorkloadDescription:
    """An sbatch script (it starts with ``#!`` or holds ``#SBATCH`` lines) or a Kubernetes manifest."""
    if text.lstrip().startswith("#!") or any(_SBATCH.match(line.strip()) for line in text.splitlines()):
        return describe_sbatch(text, name)
    return describe_manifest(text, name)


def describe_sbatch(text: str, name: str = "") -> WorkloadDescription:
    """``#SBATCH`` options: ``--gres=gpu[:type]:N`` / ``--gpus-per-node``, ``-N``/``--nodes``, ``-t``/``--time``,
    ``-A``/``--account`` (the team). Options after the first command line are ignored, as sbatch does."""
    options: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if line and not line.startswith("#"):
            break
        match = _SBATCH.match(line)
        if match:
            _sbatch_options(match.group(1).split("#")[0].split(), options, number)
    gpus = _gres_gpus(options.get("gres", "")) or _int(options.get("gpus-per-node", "0"), "--gpus-per-node")
    return WorkloadDescription(
        gpus_per_member=gpus, members=_int(options.get("nodes", "1").split("-")[0], "--nodes"),
        duration_s=slurm_time(options["time"]) if "time" in options else 0.0,
        team=options.get("account", ""), kind=WorkloadKind.TRAINING.value, source=name or "sbatch",
    )


_SHORT = {"-N": "nodes", "-t": "time", "-A": "account", "-G": "gpus"}


def _sbatch_options(words: list[str], options: dict[str, str], number: int) -> None:
    index = 0
    while index < len(words):
        word = words[index]
        if word.startswith("--"):
            key, _, value = word[2:].partition("=")
            if not value and index + 1 < len(words) and not words[index + 1].startswith("-"):
                index += 1
                value = words[index]
            options[key] = value
        elif word[:2] in _SHORT:
            value = word[2:].lstrip("=")
            if not value:
                if index + 1 >= len(words):
                    raise ValueError(f"line {number}: {word} needs a value")
                index += 1
                value = words[index]
            options[_SHORT[word[:2]]] = value
        index += 1


def _gres_gpus(gres: str) -> int:
    for item in filter(None, gres.split(",")):
        parts = item.split(":")
        if parts[0] == "gpu":
            return _int(parts[-1], "--gres") if len(parts) > 1 else 1
    return 0


def slurm_time(value: str) -> float:
    """Slurm's --time forms: M, M:S, H:M:S, D-H, D-H:M, D-H:M:S (seconds); "UNLIMITED" is 0 (unknown)."""
    if value.upper() in ("UNLIMITED", "INFINITE"):
        return 0.0
    days, _, rest = value.rpartition("-")
    try:
        fields = [int(part) for part in rest.split(":")]
        day_s = int(days) * 86_400 if days else 0
    except ValueError as error:
        raise ValueError(f"--time {value!r} is not a Slurm time (M, H:M:S, D-H:M:S)") from error
    if days:
        hours, minutes, seconds = [*fields, 0, 0][:3]
    elif len(fields) == 3:
        hours, minutes, seconds = fields
    else:
        hours, (minutes, seconds) = 0, [*fields, 0][:2]
    return float(day_s + hours * 3600 + minutes * 60 + seconds)


def describe_manifest(text: str, name: str = "") -> WorkloadDescription:
    """A Pod, a batch/v1 Job, or a Volcano Job: GPUs from ``nvidia.com/gpu`` limits, members from replicas or
    parallelism, the team from the ``scheduler.gpuportal.io/team`` label or the namespace, duration from the
    duration annotation or ``activeDeadlineSeconds``."""
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise ValueError(f"not YAML: {error}") from error
    if not isinstance(document, dict) or "kind" not in document:
        raise ValueError("expected one Kubernetes object with a kind (Pod, Job or a Volcano Job)")
    return describe_object(document, name)


def describe_object(document: dict, name: str = "") -> WorkloadDescription:
    """``describe_manifest`` for an object already decoded (the admission webhook's)."""
    meta = document.get("metadata") or {}
    annotations = meta.get("annotations") or {}
    spec = document.get("spec") or {}
    members, pod_spec = _members_and_pod(document["kind"], spec)
    deadline = spec.get("activeDeadlineSeconds") or pod_spec.get("activeDeadlineSeconds") or 0
    duration = annotations.get(DURATION_ANNOTATION)
    return WorkloadDescription(
        gpus_per_member=_pod_gpus(pod_spec), members=members,
        duration_s=slurm_time(str(duration)) if duration else float(deadline),
        team=(meta.get("labels") or {}).get(TEAM_LABEL) or meta.get("namespace", ""),
        kind=annotations.get(KIND_ANNOTATION, WorkloadKind.BATCH.value),
        scheduler=annotations.get(SCHEDULER_ANNOTATION, ""),
        source=name or f"{document['kind']}/{meta.get('name', '')}",
    )


def _members_and_pod(kind: str, spec: dict) -> tuple[int, dict]:
    if kind == "Pod":
        return 1, spec
    if kind == "Job" and "tasks" in spec:  # Volcano: batch.volcano.sh/v1alpha1 Job
        tasks = spec.get("tasks") or []
        if not tasks:
            raise ValueError("a Volcano Job needs at least one task")
        gpu_tasks = [task for task in tasks if _pod_gpus(_template_spec(task))] or tasks[:1]
        largest = max(gpu_tasks, key=lambda task: _pod_gpus(_template_spec(task)))
        return max(1, sum(int(task.get("replicas", 1)) for task in gpu_tasks)), _template_spec(largest)
    if kind == "Job":
        return max(1, int(spec.get("parallelism", 1))), _template_spec(spec)
    raise ValueError(f"cannot route a {kind}: expected Pod, Job or a Volcano Job")


def _template_spec(owner: dict) -> dict:
    return ((owner.get("template") or {}).get("spec")) or {}


def _pod_gpus(pod_spec: dict) -> int:
    total = 0
    for container in pod_spec.get("containers") or []:
        resources = container.get("resources") or {}
        requested = (resources.get("requests") or {}).get(GPU_RESOURCE, 0)
        limit = (resources.get("limits") or {}).get(GPU_RESOURCE, requested)
        total += _int(str(limit), GPU_RESOURCE)
    return total


def _int(value: str, what: str) -> int:
    try:
        number = int(value)
    except ValueError as error:
        raise ValueError(f"{what}: {value!r} is not a whole number") from error
    if number < 0:
        raise ValueError(f"{what}: {value!r} is negative")
    return number
