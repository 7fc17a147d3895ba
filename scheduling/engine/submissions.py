"""Submissions as the router reads them: an sbatch script, a Pod, a batch/v1 Job or a Volcano Job (text or
an object already decoded) to a ``WorkloadDescription``. Pure functions from text to plain data; they raise
``ValueError`` with the line or field at fault. The router itself is ``selectors/routing.py`` (it reads the pools)
over ``engine/routing.py`` (the decision).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import yaml

from scheduling.engine.types import WorkloadKind

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


def describe_object(document: dict[str, Any], name: str = "") -> WorkloadDescription:
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


def _members_and_pod(kind: str, spec: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    if kind == "Pod":
        return 1, spec
    if kind == "Job" and "tasks" in spec:  # Volcano: batch.volcano.sh/v1alpha1 Job
        tasks = spec.get("tasks") or []
        if not tasks:
            raise ValueError("a Volcano Job needs at least one task")
        gpu_tasks = [task for task in tasks if _pod_gpus(_template_spec(task))] or tasks[:1]
        largest = max(gpu_tasks, key=lambda task: _pod_gpus(_template_spec(task)))
        members = sum(_count(task.get("replicas"), "spec.tasks[].replicas") for task in gpu_tasks)
        return max(1, members), _template_spec(largest)
    if kind == "Job":
        return max(1, _count(spec.get("parallelism"), "spec.parallelism")), _template_spec(spec)
    raise ValueError(f"cannot route a {kind}: expected Pod, Job or a Volcano Job")


def _template_spec(owner: dict[str, Any]) -> dict[str, Any]:
    return ((owner.get("template") or {}).get("spec")) or {}


def _pod_gpus(pod_spec: dict[str, Any]) -> int:
    total = 0
    for container in pod_spec.get("containers") or []:
        resources = container.get("resources") or {}
        requested = (resources.get("requests") or {}).get(GPU_RESOURCE, 0)
        limit = (resources.get("limits") or {}).get(GPU_RESOURCE, requested)
        total += _int(str(limit), GPU_RESOURCE)
    return total


def _count(value: object, what: str) -> int:
    """A replica count as the API server defaults it: absent or null is 1."""
    return 1 if value is None else _int(str(value), what)


def _int(value: str, what: str) -> int:
    try:
        number = int(value)
    except ValueError as error:
        raise ValueError(f"{what}: {value!r} is not a whole number") from error
    if number < 0:
        raise ValueError(f"{what}: {value!r} is negative")
    return number
