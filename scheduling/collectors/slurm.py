"""Slurm collector: slurmrestd (openapi v0.0.36-v0.0.38 on Slurm 22.05, v0.0.40-v0.0.42 on 23.x/24.x)
-> :class:`Snapshot`. Newer objects are read through :mod:`.slurm_wire`, which gives them the older shape.

GPU facts come from the ``gres``/``gres_used`` strings (``gpu:h100:5(IDX:0-4)``); slurmrestd 22.05 has no
topology endpoint, so the switch tree is passed in (parse ``topology.conf`` or ``scontrol show topology``
with :func:`parse_topology`).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

import httpx
import msgspec

from scheduling.engine.owners import Claim, NameKind
from scheduling.engine.types import OrchestratorKind, WorkloadKind

from . import conditions
from .errors import MalformedResponse, SourceUnavailable
from .hostlist import count_index_list, expand_hostlist, index_list
from .httpjson import JsonClient, require
from .reliability import DEFAULT_RETRY, DEFAULT_TIMEOUT_S, CircuitBreaker, RetryPolicy, guarded
from .slurm_wire import job_v38, node_v38, number, partition_v38
from .snapshot import (
    DEFAULT_TEAMS,
    ObservedNode,
    ObservedQueue,
    ObservedWorkload,
    Snapshot,
    TeamMapping,
    WorkloadState,
)

# Every job field parse_job (and job_v38 before it) reads: a job whose values of these are unchanged parses to
# the same workload, so an incremental round reuses it (tests/collectors/test_slurm_incremental.py checks the
# list against the parser). Volatile fields nothing reads (last_sched_evaluation...) stay out.
JOB_FIELDS_READ = (
    "job_id", "job_state", "state_reason", "node_count", "gres_detail", "tres_per_node", "tres_per_task",
    "tasks", "tres_per_job", "array_job_id", "array_task_string", "array_task_id", "account", "user_name",
    "name", "priority", "submit_time", "start_time", "nodes", "job_resources", "partition",
)  # fmt: skip
# A job as the collector decodes it: only the fields read (msgspec skips the ~90 others undecoded). Field
# order is JOB_FIELDS_READ's, so msgspec.structs.astuple gives the job's fingerprint at C speed.
JobWire = msgspec.defstruct(
    "JobWire", [(name, Any, msgspec.UNSET) for name in JOB_FIELDS_READ], gc=False, forbid_unknown_fields=False
)


class JobsWire(msgspec.Struct, gc=False):
    """The /jobs answer: its jobs, errors, warnings and (v0.0.40+) slurmctld's ``last_update``."""

    jobs: list[JobWire] | msgspec.UnsetType = msgspec.UNSET  # type: ignore[valid-type]
    errors: Any = msgspec.UNSET
    warnings: Any = msgspec.UNSET
    last_update: Any = msgspec.UNSET


_JOBS_DECODER = msgspec.json.Decoder(JobsWire)


def decode_jobs(body: bytes) -> dict[str, Any]:
    """A /jobs body as a document of :data:`JobWire` jobs (keys slurmrestd left out stay out); a body that is
    not whole JSON, or a job that is not an object, is refused whole."""
    try:
        wire = _JOBS_DECODER.decode(body)
    except msgspec.ValidationError as exc:
        raise MalformedResponse(f"jobs: a bad field: {exc}") from exc
    except msgspec.DecodeError as exc:
        raise MalformedResponse(f"jobs: not whole JSON ({exc}; {len(body)} bytes)") from exc
    return {name: value for name in JobsWire.__struct_fields__ if (value := getattr(wire, name)) is not msgspec.UNSET}


def _job_fields(raw: Any) -> tuple[Any, ...]:
    """A job's read fields in JOB_FIELDS_READ order (its fingerprint), from a wire job or a dict."""
    if isinstance(raw, JobWire):
        return msgspec.structs.astuple(raw)
    return tuple(raw.get(k, msgspec.UNSET) for k in JOB_FIELDS_READ)


def _job_dict(fields: tuple[Any, ...]) -> dict[str, Any]:
    return {k: v for k, v in zip(JOB_FIELDS_READ, fields, strict=True) if v is not msgspec.UNSET}


RUNNING_JOB_STATES = frozenset({"RUNNING", "CONFIGURING", "COMPLETING"})
HOLD_REASONS = frozenset({"Dependency", "DependencyNeverSatisfied", "BeginTime", "JobHeldAdmin", "JobHeldUser"})


@dataclass(frozen=True, slots=True)
class GresEntry:
    name: str
    type: str
    count: int
    indices: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class TopologyPath:
    leaf_switch: str
    spine: str = ""


def _split_top_level(text: str) -> list[str]:
    """Split a GRES list on commas outside parentheses (``IDX:0,2-3`` has commas of its own)."""
    if "(" not in text:
        return [p.strip() for p in text.split(",") if p.strip()]
    parts, depth, start = [], 0, 0
    for i, char in enumerate(text):
        depth += char == "("
        depth -= char == ")"
        if char == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p.strip() for p in parts if p.strip()]


_GRES = re.compile(r"^(?:gres[:/])?(?P<body>[^()]+?)(?:\((?P<extra>[^)]*)\))?$")


def parse_gres(text: str | None) -> list[GresEntry]:
    """``gpu:h100:5(IDX:0-4),gpu:a100:0(IDX:N/A)`` -> entries; ``N/A``/empty -> ``[]``."""
    if not text or text in ("N/A", "(null)"):
        return []
    entries = []
    for part in _split_top_level(text):
        match = _GRES.match(part)
        if not match:
            raise MalformedResponse(f"slurm: unreadable GRES entry {part!r}")
        fields = match["body"].split(":")
        if len(fields) == 1 or not fields[-1].isdigit():
            # "gpu" or "gpu:h100" alone means one unit (Slurm's default count).
            fields.append("1")
        name, count = fields[0], int(fields[-1])
        gres_type = ":".join(fields[1:-1])
        extra = match["extra"] or ""
        indices = index_list(extra[4:]) if extra.startswith("IDX:") else ()
        entries.append(GresEntry(name, gres_type, count, indices))
    return entries


def gpu_count(text: str | None) -> int:
    return sum(e.count for e in parse_gres(text) if e.name == "gpu")


def parse_topology(text: str) -> dict[str, TopologyPath]:
    """Node -> (leaf switch, spine) from ``topology.conf`` or ``scontrol show topology`` text.
    A leaf is a switch with ``Nodes=`` and no ``Switches=``; its spine is the switch listing it."""
    switches: dict[str, dict[str, list[str]]] = {}
    for line in text.splitlines():
        fields = dict(f.split("=", 1) for f in line.split() if "=" in f)
        if "SwitchName" in fields:
            switches[fields["SwitchName"]] = {
                "nodes": expand_hostlist(fields.get("Nodes")),
                "switches": expand_hostlist(fields.get("Switches")),
            }
    parent = {child: name for name, s in switches.items() for child in s["switches"]}
    paths: dict[str, TopologyPath] = {}
    for name, switch in switches.items():
        if switch["switches"]:
            continue
        for node in switch["nodes"]:
            paths[node] = TopologyPath(leaf_switch=name, spine=parent.get(name, ""))
    return paths


def _node_flags(raw: dict[str, Any]) -> tuple[str, tuple[str, ...]]:
    """(base state, flags). v0.0.36 has no ``state_flags``: there a reason on a node that is not
    down can only mean an admin drain (Slurm clears the reason on resume), so DRAIN is inferred."""
    base = str(raw["state"]).lower()
    if "state_flags" in raw:
        return base, tuple(str(f).upper() for f in raw["state_flags"] or ())
    return base, ("DRAIN",) if raw.get("reason") and base not in ("down", "unknown") else ()


def parse_node(
    raw: dict[str, Any], *, orchestrator: str, topology: Mapping[str, TopologyPath] | None = None
) -> ObservedNode:
    raw = node_v38(raw)
    for key in ("name", "state", "gres", "gres_used"):
        require(raw, key, (str,), f"slurm node {raw.get('name', '?')}")
    used = [e for e in parse_gres(raw["gres_used"]) if e.name == "gpu"]
    configured = [e for e in parse_gres(raw["gres"]) if e.name == "gpu"]
    base, flags = _node_flags(raw)
    allocated = sum(e.count for e in used)
    path = (topology or {}).get(raw["name"])
    return ObservedNode(
        name=raw["name"],
        orchestrator=orchestrator,
        gpu_total=sum(e.count for e in configured),
        gpu_allocated=allocated,
        gpu_model=next((e.type for e in configured if e.type), ""),
        # One DGX/HGX board: its GPUs share NVSwitch, so the node is its NVLink domain.
        nvlink_domain=raw["name"],
        leaf_switch=path.leaf_switch if path else "",
        spine=path.spine if path else "",
        state=conditions.slurm_state(base, flags),
        state_flags=flags,
        reason=str(raw.get("reason") or ""),
        cordoned=conditions.slurm_drain_requested(flags),
        partitions=tuple(raw.get("partitions") or ()),
        schedulable=conditions.slurm_schedulable(base, flags),
        condition=conditions.slurm_condition(base, flags, allocated),
        gpu_allocated_indices=tuple(i for e in used for i in e.indices),
        cpu_total=int(raw.get("cpus") or 0),
        address=str(raw.get("address") or ""),
    )


def _gpus_in_tres(text: str | None) -> int:
    """GPUs named in a ``tres_per_*`` string such as ``gres:gpu:h100:4`` or ``gres/gpu=2``."""
    if not text:
        return 0
    total = 0
    for part in _split_top_level(text.replace("gres/", "gres:").replace("=", ":")):
        fields = part.removeprefix("gres:").split(":")
        if fields[0] == "gpu":
            total += int(fields[-1]) if fields[-1].isdigit() else 1
    return total


def _job_gpus(raw: dict[str, Any], nodes: int, running: bool) -> int:
    """Total GPUs of one job (one array task): allocated per node when running, else requested."""
    detail = raw.get("gres_detail") or []
    if running and detail:
        return sum(gpu_count(d) for d in detail)
    per_node = _gpus_in_tres(raw.get("tres_per_node"))
    if per_node:
        return per_node * nodes
    per_task = _gpus_in_tres(raw.get("tres_per_task"))
    if per_task:
        return per_task * max(int(raw.get("tasks") or 1), 1)
    return _gpus_in_tres(raw.get("tres_per_job"))


def _allocated_nodes(raw: dict[str, Any]) -> list[str]:
    """The job's nodes in Slurm's own order, the order of ``gres_detail``: ``job_resources``'
    ``allocated_nodes`` (v0.0.38) where given, else the expanded ``nodes`` hostlist."""
    listed = expand_hostlist(raw.get("nodes"))
    resources = raw.get("job_resources") or {}
    named = [n.get("nodename") for n in resources.get("allocated_nodes") or () if isinstance(n, dict)]
    return [str(n) for n in named] if sorted(map(str, named)) == sorted(listed) else listed


def gpu_placement(raw: dict[str, Any]) -> tuple[tuple[str, ...], tuple[tuple[int, ...], ...]]:
    """(nodes, GPU indices per node) of a running job. ``gres_detail`` has one entry per allocated node
    (``gpu:h100:4(IDX:1-4)``); when it is missing, or does not line up with the nodes, or names no
    index, the indices are left empty rather than guessed."""
    nodes = _allocated_nodes(raw)
    detail = raw.get("gres_detail") or []
    if len(detail) != len(nodes):
        return tuple(nodes), ()
    indices = tuple(tuple(i for e in parse_gres(d) if e.name == "gpu" for i in e.indices) for d in detail)
    return tuple(nodes), indices if all(indices) else ()


def fill_indices_from_nodes(
    workloads: tuple[ObservedWorkload, ...], nodes: tuple[ObservedNode, ...]
) -> tuple[ObservedWorkload, ...]:
    """Give a running job without ``gres_detail`` indices (older API versions) the indices of its node's
    ``gres_used`` that no other job claims, where that is unambiguous: it is the only such job on each
    of its nodes and the free-of-claims indices number exactly its GPUs there."""
    used = {n.name: set(n.gpu_allocated_indices) for n in nodes if n.gpu_allocated_indices}
    unknown: dict[str, list[ObservedWorkload]] = {}
    for w in workloads:
        if w.state is not WorkloadState.RUNNING:
            continue
        for i, node in enumerate(w.nodes):
            if w.node_gpu_indices:
                used.get(node, set()).difference_update(w.node_gpu_indices[i])
            else:
                unknown.setdefault(node, []).append(w)

    def resolved(w: ObservedWorkload) -> tuple[tuple[int, ...], ...]:
        per_node = []
        for node in w.nodes:
            free = used.get(node, set())
            if len(unknown.get(node, ())) != 1 or len(free) != round(w.gpus_per_member):
                return ()
            per_node.append(tuple(sorted(free)))
        return tuple(per_node)

    return tuple(
        replace(w, node_gpu_indices=found)
        if w.state is WorkloadState.RUNNING and w.nodes and not w.node_gpu_indices and (found := resolved(w))
        else w
        for w in workloads
    )


def _job_state(raw: dict[str, Any]) -> WorkloadState | None:
    state = str(raw["job_state"]).upper()
    if state in RUNNING_JOB_STATES:
        return WorkloadState.RUNNING
    if state == "SUSPENDED":
        return WorkloadState.SUSPENDED
    if state in ("PENDING", "REQUEUED"):
        held = str(raw.get("state_reason") or "") in HOLD_REASONS
        return WorkloadState.HELD if held else WorkloadState.PENDING
    return None  # finished, cancelled, failed...: no longer demand


def _array_identity(raw: dict[str, Any]) -> tuple[str, str, int]:
    """(external id, array id, instances): a pending array remainder ``5_[0-3]`` counts 4 tasks."""
    array_job = int(raw.get("array_job_id") or 0)
    if not array_job:
        return str(raw["job_id"]), "", 1
    task_string = str(raw.get("array_task_string") or "")
    if task_string:
        return f"{array_job}_[{task_string}]", str(array_job), max(count_index_list(task_string), 1)
    return f"{array_job}_{raw.get('array_task_id')}", str(array_job), 1


def parse_job(raw: dict[str, Any], *, orchestrator: str, teams: TeamMapping) -> ObservedWorkload | None:
    """One workload for a job (or pending array remainder); ``None`` for finished jobs and jobs
    without GPUs (they do not compete for the fleet)."""
    raw = job_v38(raw)
    require(raw, "job_id", (int,), "slurm job")
    require(raw, "job_state", (str,), f"slurm job {raw['job_id']}")
    state = _job_state(raw)
    if state is None:
        return None
    nodes = max(int(raw.get("node_count") or 1), 1)
    total = _job_gpus(raw, nodes, state is WorkloadState.RUNNING)
    if total == 0:
        return None
    external_id, array_id, instances = _array_identity(raw)
    reason = str(raw.get("state_reason") or "")
    running = state is WorkloadState.RUNNING
    nodes_held, indices = gpu_placement(raw) if running else ((), ())
    return ObservedWorkload(
        external_id=external_id,
        orchestrator=orchestrator,
        team=teams.slurm_team(raw.get("account"), raw.get("user_name")),
        user=str(raw.get("user_name") or ""),
        claims=(Claim(NameKind.SLURM_USER, str(raw["user_name"])),) if raw.get("user_name") else (),
        name=str(raw.get("name") or ""),
        state=state,
        gang_size=nodes,
        gpus_per_member=total / nodes,
        instances=instances,
        kind=WorkloadKind.HPO if array_id else WorkloadKind.TRAINING if nodes > 1 else WorkloadKind.BATCH,
        priority=int(raw.get("priority") or 0),
        submitted_at=float(raw["submit_time"]) if raw.get("submit_time") else None,
        started_at=float(raw["start_time"]) if state is WorkloadState.RUNNING and raw.get("start_time") else None,
        nodes=nodes_held,
        pending_reason="" if reason == "None" or running else reason,
        array_id=array_id,
        queue=str(raw.get("partition") or ""),
        node_gpu_indices=indices,
    )


def parse_partition(raw: dict[str, Any], *, orchestrator: str, gpus_by_node: Mapping[str, int]) -> ObservedQueue:
    raw = partition_v38(raw)
    require(raw, "name", (str,), "slurm partition")
    nodes = tuple(expand_hostlist(raw.get("nodes")))
    return ObservedQueue(
        name=raw["name"],
        orchestrator=orchestrator,
        kind="slurm_partition",
        state=str(raw.get("state") or ""),
        priority_tier=int(raw.get("priority_tier") or 0),
        nodes=nodes,
        gpu_total=sum(gpus_by_node.get(n, 0) for n in nodes),
    )


def _items(document: Any, key: str, where: str) -> list[dict[str, Any]]:
    """The list under ``key`` of a slurmrestd document, refusing any document that reports errors."""
    if not isinstance(document, dict):
        raise MalformedResponse(f"{where}: expected a JSON object")
    errors = document.get("errors") or []
    if errors:
        # slurmrestd answers 200 with an errors array when slurmctld could not be queried.
        raise SourceUnavailable(f"{where}: slurmrestd reported {errors}", retryable=True)
    items = require(document, key, (list,), where)
    if not all(isinstance(i, dict | JobWire) for i in items):
        raise MalformedResponse(f"{where}: {key} holds non-objects")
    return items


# Incremental rounds. slurmctld's update_time is all or nothing (proc_req.c _slurm_rpc_dump_jobs): when no
# job changed since it the answer is "no change" (an empty list), otherwise every job comes back. So a round
# asks with a cursor, keeps what it knew when nothing changed, and otherwise re-parses only the jobs whose
# read fields changed; a job missing from the list is gone (ended and purged).
FULL_LIST_EVERY = 20  # rounds: at 30 s a round, every job is re-read and re-parsed from scratch every 10 min
CURSOR_OVERLAP_S = 30  # taken off the cursor: clock skew between portal and slurmctld, and same-second changes
NO_CHANGE_WARNING = "No job changes"  # v0.0.40+ says so; v0.0.37/38 answer an empty list without a word


def takes_update_time(api_version: str) -> bool:
    """v0.0.37 on take ``update_time`` on /jobs; v0.0.36 has no such parameter (openapi_v3.json of 22.05)."""
    match = re.fullmatch(r"v0\.0\.(\d+)", api_version)
    return not match or int(match[1]) >= 37


@dataclass
class SlurmJobCache:
    """What one orchestrator's earlier rounds knew: the cursor and each job's read fields with its workload.
    Kept by the caller from round to round (:func:`job_cache_for`); a new one (a restart) means a full list.
    ``last_round`` is "full", "incremental" or "unchanged", for logs and tests."""

    full_every: int = FULL_LIST_EVERY
    overlap_s: int = CURSOR_OVERLAP_S
    cursor: int | None = None
    known: dict[Any, tuple[tuple[Any, ...], ObservedWorkload | None]] = field(default_factory=dict)
    rounds_since_full: int = 0
    last_round: str = ""

    def wants_full(self) -> bool:
        return self.cursor is None or self.rounds_since_full + 1 >= self.full_every

    def forget(self) -> None:
        self.cursor, self.known, self.rounds_since_full = None, {}, 0

    def workloads(self) -> tuple[ObservedWorkload, ...]:
        return tuple(w for _fields, w in self.known.values() if w is not None)


_JOB_CACHES: dict[tuple[Any, ...], SlurmJobCache] = {}


def job_cache_for(*key: Any) -> SlurmJobCache:
    """This process's cache for one orchestrator (key: its id, endpoint, API version: a changed endpoint or
    version starts over). Rounds of one orchestrator never overlap (round leases), so no lock."""
    return _JOB_CACHES.setdefault(key, SlurmJobCache())


def parse_jobs(
    raws: Iterable[Any],
    *,
    orchestrator: str,
    teams: TeamMapping,
    cache: SlurmJobCache | None = None,
    full: bool = True,
) -> tuple[ObservedWorkload, ...]:
    """Workloads of a full job list. With a cache and not ``full``, a job whose read fields equal last
    round's keeps last round's workload; the cache then holds exactly this list (ended jobs drop out)."""
    known = {} if cache is None or full else cache.known
    seen: dict[Any, tuple[tuple[Any, ...], ObservedWorkload | None]] = {}
    for raw in raws:
        fields = _job_fields(raw)
        hit = known.get(fields[0])
        if hit is not None and hit[0] == fields:
            workload = hit[1]
        else:
            as_dict = _job_dict(fields) if isinstance(raw, JobWire) else raw
            workload = parse_job(as_dict, orchestrator=orchestrator, teams=teams)
        seen[fields[0]] = (fields, workload)
    if cache is not None:
        cache.known = seen
    return tuple(w for _fields, w in seen.values() if w is not None)


def advance_cursor(cache: SlurmJobCache, jobs_doc: Any, taken_at: datetime) -> None:
    """The cursor after a round: slurmctld's own ``last_update`` where the answer gives it (v0.0.40+), else
    the time the round began; less the overlap, so a change in the same second or under clock skew is asked
    for again."""
    stamp = number(jobs_doc.get("last_update")) if isinstance(jobs_doc, dict) else None
    seen = int(stamp) if isinstance(stamp, int | float) and stamp > 0 else int(taken_at.timestamp())
    cache.cursor = seen - cache.overlap_s
    cache.rounds_since_full = 0 if cache.last_round == "full" else cache.rounds_since_full + 1


def build_snapshot(
    name: str,
    nodes_doc: Any,
    jobs_doc: Any,
    partitions_doc: Any,
    *,
    topology: Mapping[str, TopologyPath] | None = None,
    teams: TeamMapping = DEFAULT_TEAMS,
    taken_at: datetime | None = None,
    job_cache: SlurmJobCache | None = None,
) -> Snapshot:
    """Parse the three slurmrestd documents of one round into a snapshot (pure; used by tests). With a
    ``job_cache`` whose ``last_round`` is "unchanged", ``jobs_doc`` is not read: the cache's jobs stand."""
    nodes = tuple(parse_node(raw, orchestrator=name, topology=topology) for raw in _items(nodes_doc, "nodes", "nodes"))
    if job_cache is not None and job_cache.last_round == "unchanged":
        workloads = job_cache.workloads()
    else:
        full = job_cache is None or job_cache.last_round != "incremental"
        raws = _items(jobs_doc, "jobs", "jobs")
        workloads = parse_jobs(raws, orchestrator=name, teams=teams, cache=job_cache, full=full)
    workloads = fill_indices_from_nodes(workloads, nodes)
    gpus_by_node = {n.name: n.gpu_total for n in nodes}
    queues = tuple(
        parse_partition(raw, orchestrator=name, gpus_by_node=gpus_by_node)
        for raw in _items(partitions_doc, "partitions", "partitions")
    )
    missing = sorted(n.name for n in nodes if topology and n.name not in topology)
    return Snapshot(
        orchestrator_name=name,
        kind=OrchestratorKind.SLURM,
        taken_at=taken_at or datetime.now(UTC),
        nodes=nodes,
        workloads=workloads,
        queues=queues,
        pending_gpus=sum(w.gpus for w in workloads if w.state is WorkloadState.PENDING),
        errors=(f"no topology for nodes {', '.join(missing)}",) if missing else (),
    )


def jwt_headers(user: str, token: str) -> dict[str, str]:
    """slurmrestd's JWT headers; none at all without a token (an empty header is a 500 in 22.05,
    no header a clean 401, and a local-auth slurmrestd needs none)."""
    return {"X-SLURM-USER-NAME": user, "X-SLURM-USER-TOKEN": token} if token else {}


class SlurmCollector:
    """Reads nodes, jobs and partitions from slurmrestd with a JWT (``X-SLURM-USER-TOKEN``)."""

    def __init__(
        self,
        base_url: str,
        token: str,
        user: str,
        api_version: str = "v0.0.38",
        transport: httpx.BaseTransport | None = None,
        *,
        name: str = "slurm",
        topology: Mapping[str, TopologyPath] | None = None,
        teams: TeamMapping = DEFAULT_TEAMS,
        retry: RetryPolicy = DEFAULT_RETRY,
        breaker: CircuitBreaker | None = None,
        timeout: float = DEFAULT_TIMEOUT_S,
        sleep: Callable[[float], None] = time.sleep,
        job_cache: SlurmJobCache | None = None,
    ) -> None:
        self.name = name
        self.job_cache = job_cache
        self.api_version = api_version
        self.topology = topology
        self.teams = teams
        self.breaker = breaker
        self.client = JsonClient(
            base_url,
            name=name,
            headers=jwt_headers(user, token),
            timeout=timeout,
            retry=retry,
            transport=transport,
            sleep=sleep,
        )

    def collect(self) -> Snapshot:
        return guarded(self.breaker, self.name, self._collect)

    def close(self) -> None:
        """Release the pooled HTTP connections (also done by ``with collector: ...``)."""
        self.client.close()

    def __enter__(self) -> SlurmCollector:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def _collect(self) -> Snapshot:
        taken_at = datetime.now(UTC)
        base = f"/slurm/{self.api_version}"
        nodes_doc = self.client.get_json(f"{base}/nodes")
        jobs_doc = self._jobs(f"{base}/jobs", taken_at)
        partitions_doc = self.client.get_json(f"{base}/partitions")
        snapshot = build_snapshot(
            self.name,
            nodes_doc,
            jobs_doc,
            partitions_doc,
            topology=self.topology,
            teams=self.teams,
            taken_at=taken_at,
            job_cache=self.job_cache,
        )
        if self.job_cache is not None:
            advance_cursor(self.job_cache, jobs_doc, taken_at)
        return snapshot

    def _jobs(self, path: str, taken_at: datetime) -> Any:
        """The jobs document of this round; sets the cache's ``last_round``. Asks with the cursor when there is
        one (and the version takes it), else, and every ``full_every`` rounds, for the full list."""
        cache = self.job_cache
        if cache is None:
            return decode_jobs(self.client.get_body(path))
        if cache.wants_full() or not takes_update_time(self.api_version):
            cache.last_round = "full"
            return decode_jobs(self.client.get_body(path))
        document = decode_jobs(self.client.get_body(path, params={"update_time": cache.cursor}))
        listed = document.get("jobs") if isinstance(document, dict) else None
        if listed or (isinstance(document, dict) and document.get("errors")):
            cache.last_round = "incremental"  # something changed: every job came back
            return document
        warnings = str(document.get("warnings") or "") if isinstance(document, dict) else ""
        if listed == [] and (NO_CHANGE_WARNING in warnings or not cache.known):
            cache.last_round = "unchanged"
            return document
        # An empty list without the v0.0.40+ warning: "no change" and "no job left" look alike; ask in full.
        cache.last_round = "full"
        return decode_jobs(self.client.get_body(path))

    @staticmethod
    def resources() -> Iterable[str]:
        return ("nodes", "jobs", "partitions")
