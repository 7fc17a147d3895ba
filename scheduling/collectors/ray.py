"""Ray collector: the dashboard HTTP API (``:8265``) -> :class:`Snapshot`.

Per-node GPU use and the pending demand come from ``/api/cluster_status`` (the autoscaler's load
report: ``usageByNode``, ``resourceDemand``, ``pgDemand``); the workloads come from the state API
(placement groups are gangs, GPU tasks and actors outside a placement group are single members),
their team from the job submission's metadata.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import httpx

from scheduling.engine.owners import RAY_SUBMITTER_KEYS, Claim, ray_claims
from scheduling.engine.types import OrchestratorKind, WorkloadKind

from . import conditions
from .errors import MalformedResponse, SourceUnavailable
from .httpjson import JsonClient, require
from .reliability import DEFAULT_RETRY, DEFAULT_TIMEOUT_S, CircuitBreaker, RetryPolicy, guarded
from .snapshot import (
    DEFAULT_LABELS,
    DEFAULT_TEAMS,
    ObservedNode,
    ObservedWorkload,
    Snapshot,
    TeamMapping,
    TopologyLabels,
    WorkloadState,
)

TASK_STATES = {
    "RUNNING": WorkloadState.RUNNING,
    "RUNNING_IN_RAY_GET": WorkloadState.RUNNING,
    "RUNNING_IN_RAY_WAIT": WorkloadState.RUNNING,
    "SUBMITTED_TO_WORKER": WorkloadState.RUNNING,
    "PENDING_NODE_ASSIGNMENT": WorkloadState.PENDING,
    "PENDING_OBJ_STORE_MEM_AVAIL": WorkloadState.PENDING,
    "PENDING_ARGS_FETCH": WorkloadState.PENDING,
    "PENDING_ARGS_AVAIL": WorkloadState.HELD,  # waits for its inputs, not for GPUs
}
ACTOR_STATES = {
    "ALIVE": WorkloadState.RUNNING,
    "PENDING_CREATION": WorkloadState.PENDING,
    "RESTARTING": WorkloadState.PENDING,
    "DEPENDENCIES_UNREADY": WorkloadState.HELD,
}
PG_STATES = {
    "CREATED": WorkloadState.RUNNING,
    "PENDING": WorkloadState.PENDING,
    "RESCHEDULING": WorkloadState.PENDING,
}


def state_api_items(document: Any, where: str) -> list[dict[str, Any]]:
    """The rows of a ``/api/v0/...`` answer; a failed, partial or truncated listing is refused whole."""
    if not isinstance(document, dict) or document.get("result") is not True:
        msg = document.get("msg") if isinstance(document, dict) else document
        raise SourceUnavailable(f"{where}: Ray state API failed: {msg}")
    data = require(require(document, "data", (dict,), where), "result", (dict,), where)
    rows = require(data, "result", (list,), where)
    if data.get("partial_failure_warning"):
        raise MalformedResponse(f"{where}: partial answer: {data['partial_failure_warning']}")
    total = int(data.get("total", len(rows)))
    if int(data.get("num_after_truncation", total)) < total:
        raise MalformedResponse(f"{where}: truncated ({data.get('num_after_truncation')} of {total} rows)")
    return rows


def load_report(document: Any) -> dict[str, Any]:
    """``loadMetricsReport`` of ``/api/cluster_status`` with the keys this collector relies on."""
    where = "cluster_status"
    if not isinstance(document, dict) or document.get("result") is not True:
        raise SourceUnavailable(f"{where}: {document.get('msg') if isinstance(document, dict) else document}")
    status = require(require(document, "data", (dict,), where), "clusterStatus", (dict,), where)
    report = require(status, "loadMetricsReport", (dict,), where)
    for key in ("usageByNode", "resourceDemand", "pgDemand"):
        require(report, key, (dict, list), where)
    return report


def pending_gpus(report: dict[str, Any]) -> float:
    """GPUs asked for and not yet granted: task/actor shapes x count plus placement-group bundles."""
    try:
        tasks = sum(shape.get("GPU", 0.0) * count for shape, count in report["resourceDemand"])
        groups = sum(
            shape.get("GPU", 0.0) * bundles * count
            for demand, count in report["pgDemand"]
            for shape, bundles in demand["bundles"]
        )
    except (TypeError, ValueError, KeyError) as exc:
        raise MalformedResponse(f"cluster_status: unreadable demand ({exc})") from exc
    return float(tasks + groups)


def parse_node(
    raw: dict[str, Any],
    usage: dict[str, Any],
    *,
    orchestrator: str,
    labels_config: TopologyLabels = DEFAULT_LABELS,
) -> ObservedNode:
    for key in ("node_id", "state", "resources_total"):
        require(raw, key, (str, dict), "ray node")
    labels = {str(k): str(v) for k, v in (raw.get("labels") or {}).items()}
    resources = raw["resources_total"]
    alive = conditions.ray_alive(raw["state"])
    node_usage = usage.get(raw["node_id"], {})
    if alive and "GPU" in resources and "GPU" not in node_usage:
        raise MalformedResponse(f"cluster_status: no GPU usage for live node {raw['node_id']}")
    gpu_allocated = round(node_usage["GPU"][0]) if alive and "GPU" in node_usage else 0
    accelerator = next((k.split(":", 1)[1] for k in resources if k.startswith("accelerator_type:")), "")
    name = str(raw.get("node_name") or raw.get("node_ip") or raw["node_id"])
    return ObservedNode(
        name=name,
        orchestrator=orchestrator,
        gpu_total=int(resources.get("GPU", 0)),
        gpu_allocated=gpu_allocated,
        gpu_model=labels_config.first(labels, labels_config.gpu_model) or accelerator,
        nvlink_domain=labels_config.first(labels, labels_config.nvlink_domain) or name,
        leaf_switch=labels_config.first(labels, labels_config.leaf_switch),
        spine=labels_config.first(labels, labels_config.spine),
        state=str(raw["state"]).lower(),
        reason=str(raw.get("state_message") or ""),
        labels=labels,
        schedulable=alive,
        condition=conditions.ray_condition(raw["state"], gpu_allocated),
        cpu_total=int(resources.get("CPU", 0)),
        address=str(raw.get("node_ip") or ""),
    )


class _JobIndex:
    """job id -> (team, submitter claims, submission id) from ``/api/jobs/`` so tasks, actors and groups inherit
    their job's team and submitter, and name the job the Jobs API stops them by (reclaim's lever). A driver
    started by hand (``type: DRIVER``) has no submission id: nothing can stop it through the Jobs API."""

    def __init__(self, jobs: Any, teams: TeamMapping) -> None:
        if not isinstance(jobs, list):
            raise MalformedResponse("jobs: expected a JSON list")
        self.teams = teams
        self.by_id: dict[str, tuple[str, tuple[Claim, ...], str]] = {}
        for job in jobs:
            job_id = job.get("job_id") or (job.get("driver_info") or {}).get("id")
            if job_id:
                metadata = job.get("metadata") or {}
                team = teams.ray_team(metadata, job.get("entrypoint"))
                claims = ray_claims(metadata, (*RAY_SUBMITTER_KEYS, teams.ray_user_key))
                submission = job.get("submission_id")
                self.by_id[str(job_id)] = (team, claims, str(submission) if submission else "")

    def owner(self, job_id: Any) -> dict[str, Any]:
        """The ``team``, ``user``, ``claims`` and ``submission_id`` of a workload of job ``job_id``."""
        team, claims, submission = self.by_id.get(str(job_id), (self.teams.default_team, (), ""))
        return {"team": team, "user": claims[0].name if claims else "", "claims": claims,
                "submission_id": submission}


def _ms(value: Any) -> float | None:
    return float(value) / 1000.0 if value else None


def parse_placement_group(
    raw: dict[str, Any], *, orchestrator: str, jobs: _JobIndex, node_names: dict[str, str]
) -> ObservedWorkload | None:
    state = PG_STATES.get(str(require(raw, "state", (str,), "placement group")))
    bundles = require(raw, "bundles", (list,), f"placement group {raw.get('placement_group_id')}")
    gpus = [float((b.get("unit_resources") or {}).get("GPU", 0.0)) for b in bundles]
    if state is None or not any(gpus):
        return None
    owner = jobs.owner(raw.get("creator_job_id"))
    stats = raw.get("stats") or {}
    created_ns = stats.get("creation_request_received_ns")
    return ObservedWorkload(
        external_id=f"pg:{raw['placement_group_id']}",
        orchestrator=orchestrator,
        **owner,
        name=str(raw.get("name") or ""),
        state=state,
        gang_size=len(bundles),
        gpus_per_member=max(gpus),
        kind=WorkloadKind.TRAINING if len(bundles) > 1 else WorkloadKind.BATCH,
        submitted_at=int(created_ns) / 1e9 if created_ns else None,
        nodes=tuple(dict.fromkeys(node_names.get(b["node_id"], b["node_id"]) for b in bundles if b.get("node_id"))),
        pending_reason=str(stats.get("scheduling_state") or "") if state is WorkloadState.PENDING else "",
    )


def parse_task(
    raw: dict[str, Any], *, orchestrator: str, jobs: _JobIndex, node_names: dict[str, str]
) -> ObservedWorkload | None:
    """GPU tasks outside placement groups (those are counted with their group); actor tasks run on
    their actor's resources, so only normal tasks count."""
    if raw.get("type") != "NORMAL_TASK" or raw.get("placement_group_id"):
        return None
    gpu = float((raw.get("required_resources") or {}).get("GPU", 0.0))
    state = TASK_STATES.get(str(require(raw, "state", (str,), "task")))
    if state is None or gpu == 0:
        return None
    owner = jobs.owner(raw.get("job_id"))
    node = raw.get("node_id")
    return ObservedWorkload(
        external_id=f"task:{raw['task_id']}:{raw.get('attempt_number', 0)}",
        orchestrator=orchestrator,
        **owner,
        name=str(raw.get("name") or raw.get("func_or_class_name") or ""),
        state=state,
        gpus_per_member=gpu,
        kind=WorkloadKind.HPO,
        submitted_at=_ms(raw.get("creation_time_ms")),
        started_at=_ms(raw.get("start_time_ms")) if state is WorkloadState.RUNNING else None,
        nodes=(node_names.get(node, node),) if node and state is WorkloadState.RUNNING else (),
        pending_reason=raw["state"] if state is not WorkloadState.RUNNING else "",
    )


def parse_actor(
    raw: dict[str, Any], *, orchestrator: str, jobs: _JobIndex, node_names: dict[str, str]
) -> ObservedWorkload | None:
    if raw.get("placement_group_id"):
        return None
    gpu = float((raw.get("required_resources") or {}).get("GPU", 0.0))
    state = ACTOR_STATES.get(str(require(raw, "state", (str,), "actor")))
    if state is None or gpu == 0:
        return None
    owner = jobs.owner(raw.get("job_id"))
    node = raw.get("node_id")
    return ObservedWorkload(
        external_id=f"actor:{raw['actor_id']}",
        orchestrator=orchestrator,
        **owner,
        name=str(raw.get("name") or raw.get("class_name") or ""),
        state=state,
        gpus_per_member=gpu,
        kind=WorkloadKind.BATCH,
        nodes=(node_names.get(node, node),) if node and state is WorkloadState.RUNNING else (),
        pending_reason=raw["state"] if state is not WorkloadState.RUNNING else "",
    )


def build_snapshot(
    name: str,
    *,
    nodes_doc: Any,
    status_doc: Any,
    jobs_doc: Any,
    placement_groups_doc: Any,
    tasks_doc: Any | None = None,
    actors_doc: Any | None = None,
    teams: TeamMapping = DEFAULT_TEAMS,
    labels_config: TopologyLabels = DEFAULT_LABELS,
    taken_at: datetime | None = None,
) -> Snapshot:
    """Parse one round's dashboard documents (pure; used by tests and the benchmark)."""
    report = load_report(status_doc)
    raw_nodes = state_api_items(nodes_doc, "nodes")
    nodes = tuple(
        parse_node(r, report["usageByNode"], orchestrator=name, labels_config=labels_config) for r in raw_nodes
    )
    node_names = {r["node_id"]: n.name for r, n in zip(raw_nodes, nodes, strict=True)}
    jobs = _JobIndex(jobs_doc, teams)
    context = {"orchestrator": name, "jobs": jobs, "node_names": node_names}
    workloads = [parse_placement_group(r, **context) for r in state_api_items(placement_groups_doc, "pgs")]
    if tasks_doc is not None:
        workloads += [parse_task(r, **context) for r in state_api_items(tasks_doc, "tasks")]
    if actors_doc is not None:
        workloads += [parse_actor(r, **context) for r in state_api_items(actors_doc, "actors")]
    return Snapshot(
        orchestrator_name=name,
        kind=OrchestratorKind.RAY,
        taken_at=taken_at or datetime.now(UTC),
        nodes=nodes,
        workloads=tuple(w for w in workloads if w is not None),
        pending_gpus=pending_gpus(report),
    )


@dataclass(frozen=True, slots=True)
class RayJobHold:
    """What one Ray job holds now: the GPUs of its running placement groups, normal tasks outside groups and
    actors outside groups (the collector's counting rule), with the owner its metadata names.
    ``submission_id`` is empty for a driver started by hand: the Jobs API cannot stop it."""

    job_id: str
    submission_id: str
    team: str
    user: str
    status: str
    started_at: float
    gpus: float


def job_holdings(
    *, jobs_doc: Any, placement_groups_doc: Any, tasks_doc: Any, actors_doc: Any, teams: TeamMapping = DEFAULT_TEAMS
) -> list[RayJobHold]:
    """GPUs held per Ray job, read from the real cluster (pure: parses the dashboard's documents)."""
    index = _JobIndex(jobs_doc, teams)
    context = {"orchestrator": "", "jobs": index, "node_names": {}}
    held: dict[str, float] = {}
    sources = (
        (state_api_items(placement_groups_doc, "pgs"), parse_placement_group, "creator_job_id"),
        (state_api_items(tasks_doc, "tasks"), parse_task, "job_id"),
        (state_api_items(actors_doc, "actors"), parse_actor, "job_id"),
    )
    for rows, parse, job_key in sources:
        for raw in rows:
            workload = parse(raw, **context)
            if workload is not None and workload.state is WorkloadState.RUNNING:
                job = str(raw.get(job_key) or "")
                held[job] = held.get(job, 0.0) + workload.gang_size * workload.gpus_per_member
    found = []
    for job in jobs_doc:
        job_id = str(job.get("job_id") or (job.get("driver_info") or {}).get("id") or "")
        owner = index.owner(job_id)
        found.append(RayJobHold(job_id, str(job.get("submission_id") or ""), owner["team"], owner["user"],
                                str(job.get("status") or ""), _ms(job.get("start_time")) or 0.0,
                                held.pop(job_id, 0.0)))
    found += [RayJobHold(job, "", index.owner(job)["team"], "", "", 0.0, gpus) for job, gpus in held.items()]
    return found


def _not_state(*states: str) -> list[tuple[str, str]]:
    """State API filters (ANDed): ``state != X`` for each X, so finished work is never listed."""
    params: list[tuple[str, str]] = []
    for state in states:
        params += [("filter_keys", "state"), ("filter_predicates", "!="), ("filter_values", state)]
    return params


class RayCollector:
    """Reads one Ray cluster through its dashboard. ``limit`` bounds each state-API listing; a listing
    that would be cut by it fails the round rather than undercount (raise it for big clusters)."""

    def __init__(
        self,
        base_url: str,
        *,
        name: str = "ray",
        teams: TeamMapping = DEFAULT_TEAMS,
        labels_config: TopologyLabels = DEFAULT_LABELS,
        retry: RetryPolicy = DEFAULT_RETRY,
        breaker: CircuitBreaker | None = None,
        timeout: float = DEFAULT_TIMEOUT_S,
        limit: int = 10_000,
        include_tasks: bool = True,
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.name = name
        self.teams = teams
        self.labels_config = labels_config
        self.breaker = breaker
        self.limit = limit
        self.include_tasks = include_tasks
        self.client = JsonClient(base_url, name=name, timeout=timeout, retry=retry, transport=transport, sleep=sleep)

    def collect(self) -> Snapshot:
        return guarded(self.breaker, self.name, self._collect)

    def close(self) -> None:
        """Release the pooled HTTP connections (also done by ``with collector: ...``)."""
        self.client.close()

    def __enter__(self) -> RayCollector:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def _status_covering(self, nodes_doc: Any) -> Any:
        """``/api/cluster_status`` once its load report covers every live GPU node. The autoscaler
        refreshes that report every few seconds, so a node that just joined can be listed before it
        is reported: ask again with backoff rather than fail or undercount."""
        live = {
            row["node_id"]
            for row in state_api_items(nodes_doc, "nodes")
            if row.get("state") == "ALIVE" and "GPU" in (row.get("resources_total") or {})
        }
        delays = self.client.retry.delays()
        while True:
            status = self.client.get_json("/api/cluster_status")
            usage = load_report(status)["usageByNode"]
            missing = sorted(n for n in live if "GPU" not in (usage.get(n) or {}))
            if not missing:
                return status
            delay = next(delays, None)
            if delay is None:
                raise SourceUnavailable(f"{self.name}: autoscaler report has no usage yet for {missing}")
            self.client.sleep(delay)

    def _listing(self, what: str, *exclude: str) -> Any:
        params = [("detail", "true"), ("limit", str(self.limit)), *_not_state(*exclude)]
        return self.client.get_json(f"/api/v0/{what}", params)

    def job_holdings(self) -> list[RayJobHold]:
        """GPUs each job holds now, read from the dashboard (the pool ceiling's read-back)."""
        return job_holdings(
            jobs_doc=self.client.get_json("/api/jobs/"),
            placement_groups_doc=self._listing("placement_groups", "REMOVED"),
            tasks_doc=self._listing("tasks", "FINISHED", "FAILED"),
            actors_doc=self._listing("actors", "DEAD"),
            teams=self.teams,
        )

    def _collect(self) -> Snapshot:
        taken_at = datetime.now(UTC)
        nodes_doc = self._listing("nodes")
        return build_snapshot(
            self.name,
            nodes_doc=nodes_doc,
            status_doc=self._status_covering(nodes_doc),
            jobs_doc=self.client.get_json("/api/jobs/"),
            placement_groups_doc=self._listing("placement_groups", "REMOVED"),
            tasks_doc=self._listing("tasks", "FINISHED", "FAILED") if self.include_tasks else None,
            actors_doc=self._listing("actors", "DEAD"),
            teams=self.teams,
            labels_config=self.labels_config,
            taken_at=taken_at,
        )
