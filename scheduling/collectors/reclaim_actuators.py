"""Stopping a reclaim's victims where the orchestrator cannot reclaim natively: the portal's lever.

    Slurm       ``scontrol requeue <job>``: the job goes back to the queue (and restarts from its last
                checkpoint, if it has one); slurmrestd has no requeue verb in the versions the portal reads
    Kubernetes  the Eviction API (``pods/eviction``): the apiserver refuses (429) while a PodDisruptionBudget
                would be broken, so a budget the team set is honoured; the pod's own grace period applies
                unless ``grace_period_s`` says otherwise
    Ray         the dashboard's Jobs API ``POST /api/jobs/{submission_id}/stop``

Plain arguments in, ``ActionResult`` out (``collectors/actuators.py``). Every verb is dry-run by default and
idempotent: applied for real it first reads the victim and answers ``changed=False`` when it is already
stopped, requeued or gone, so a retried task never stops work twice.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
from collections.abc import Mapping
from typing import Any

import httpx
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from .actuators import ActionResult, Runner
from .errors import SourceUnavailable
from .httpjson import JsonClient, check_status
from .k8s import PENDING_REMAINDER
from .k8s_wire import GROUP_ANNOTATION

_JOB_STATE = re.compile(r"\bJobState=(\S+)")
_JOB_QOS = re.compile(r"\bQOS=(\S+)")
SLURM_NOT_RUNNING = frozenset({"PENDING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "COMPLETED", "CANCELLED",
                               "FAILED", "TIMEOUT", "PREEMPTED", "NODE_FAIL", "OUT_OF_MEMORY", "BOOT_FAIL",
                               "DEADLINE"})
RAY_TERMINAL = frozenset({"STOPPED", "SUCCEEDED", "FAILED"})


class SlurmRequeue:
    """Requeue running Slurm jobs with ``scontrol`` (the Slurm client and ``SLURM_CONF`` in ``env``)."""

    def __init__(self, *, dry_run: bool = True, scontrol: str = "scontrol", env: Mapping[str, str] | None = None,
                 runner: Runner = subprocess.run, timeout: float = 30.0) -> None:
        self.dry_run = dry_run
        self.scontrol = scontrol
        self.env = {**os.environ, **(env or {})}
        self.runner = runner
        self.timeout = timeout

    def requeue(self, job_id: str) -> ActionResult:
        if not job_id.isdigit() and not re.fullmatch(r"\d+_\d+", job_id):
            raise ValueError(f"job_id: a Slurm job id (digits, or array_task), got {job_id!r}")
        command = shlex.join([self.scontrol, "requeue", job_id])
        if self.dry_run:
            return ActionResult("requeue", job_id, True, False, command, f"dry run: would requeue job {job_id}")
        state = self.job_state(job_id)
        if state in SLURM_NOT_RUNNING:
            return ActionResult("requeue", job_id, False, False, command, f"job {job_id} is already {state}")
        self._run(["requeue", job_id])
        return ActionResult("requeue", job_id, False, True, command, f"job {job_id} requeued (was {state})")

    def job_state(self, job_id: str) -> str:
        """The job's state (``RUNNING``, ``PENDING``...); ``COMPLETED`` when Slurm no longer knows it."""
        return self._job_field(job_id, _JOB_STATE, "JobState", gone="COMPLETED")

    def job_qos(self, job_id: str) -> str:
        """The QOS the job runs in ("" when Slurm no longer knows it): native reclaim leaves jobs in the borrow QOS
        to slurmctld's preemption."""
        return self._job_field(job_id, _JOB_QOS, "QOS", gone="")

    def _job_field(self, job_id: str, pattern: re.Pattern[str], name: str, *, gone: str) -> str:
        try:
            line = self._run(["show", "job", job_id, "-o"])
        except SourceUnavailable as error:
            if "Invalid job id" in str(error):
                return gone
            raise
        match = pattern.search(line)
        if not match:
            raise SourceUnavailable(f"scontrol: no {name}= for job {job_id} in {line[:120]!r}", retryable=False)
        return match.group(1)

    def _run(self, args: list[str]) -> str:
        try:
            done = self.runner([self.scontrol, *args], capture_output=True, text=True, env=self.env,
                               timeout=self.timeout, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise SourceUnavailable(f"scontrol {' '.join(args)}: {exc}") from exc
        if done.returncode != 0:
            raise SourceUnavailable(f"scontrol {' '.join(args)} -> {done.returncode}: {done.stderr.strip()}",
                                    retryable=False)
        return str(done.stdout)


def workload_pods(external_id: str) -> tuple[str, str, str]:
    """(namespace, pod, group) a collected Kubernetes workload's id names: ``ns/pod/<name>`` one pod (no group),
    ``ns/<group>`` or ``ns/<group>:pending`` a pod group's pods (no pod)."""
    namespace, _, rest = external_id.partition("/")
    if not namespace or not rest:
        raise ValueError(f"external_id: 'namespace/pod/name' or 'namespace/group', got {external_id!r}")
    if rest.startswith("pod/"):
        return namespace, rest.removeprefix("pod/"), ""
    return namespace, "", rest.removesuffix(PENDING_REMAINDER)


class KubernetesEviction:
    """Evict pods through the Eviction API, so PodDisruptionBudgets hold (a blocked eviction is reported)."""

    def __init__(self, api_client: k8s.ApiClient, *, dry_run: bool = True, grace_period_s: int | None = None) -> None:
        if grace_period_s is not None and grace_period_s < 0:
            raise ValueError(f"grace_period_s must be >= 0, got {grace_period_s}")
        self.core = k8s.CoreV1Api(api_client)
        self.dry_run = dry_run
        self.grace_period_s = grace_period_s

    def evict_workload(self, external_id: str) -> list[ActionResult]:
        """Evict a collected workload: ``ns/pod/<name>`` is one pod, ``ns/<group>`` every bound pod of a
        pod group (a gang is evicted whole; the apiserver may still refuse a member for its budget)."""
        namespace, pod, group = workload_pods(external_id)
        if pod:
            return [self.evict(namespace, pod)]
        return [self.evict(namespace, p.metadata.name) for p in self.gang_pods(namespace, group) if p.spec.node_name]

    def gang_pods(self, namespace: str, group: str) -> list[Any]:
        """A pod group's pods (the client's V1Pod), by name."""
        pods = self.core.list_namespaced_pod(namespace).items
        members = (p for p in pods if (p.metadata.annotations or {}).get(GROUP_ANNOTATION) == group)
        return sorted(members, key=lambda p: p.metadata.name)

    def evict(self, namespace: str, pod: str) -> ActionResult:
        target = f"{namespace}/{pod}"
        request = f"POST /api/v1/namespaces/{namespace}/pods/{pod}/eviction"
        if self.dry_run:
            return ActionResult("evict", target, True, False, request, f"dry run: would evict {target}")
        if self._gone(namespace, pod):
            return ActionResult("evict", target, False, False, request, f"{target} is already gone or terminating")
        for version in ("policy/v1", "policy/v1beta1"):  # v1 from Kubernetes 1.22; v1beta1 until 1.25
            try:
                self._post(namespace, pod, version)
                return ActionResult("evict", target, False, True, request, f"{target} evicted ({version})")
            except ApiException as exc:
                if exc.status == 429:
                    return ActionResult("evict", target, False, False, request,
                                        f"{target}: eviction refused, a PodDisruptionBudget would be broken")
                if exc.status == 404 and self._gone(namespace, pod):
                    return ActionResult("evict", target, False, False, request, f"{target} is already gone")
                if exc.status not in (400, 404) or version == "policy/v1beta1":
                    raise SourceUnavailable(f"kubernetes: evict {target} -> HTTP {exc.status} {exc.reason}",
                                            retryable=exc.status in (500, 503), status=exc.status) from exc
        raise AssertionError("unreachable")

    def _post(self, namespace: str, pod: str, version: str) -> None:
        body: dict[str, Any] = {"apiVersion": version, "kind": "Eviction",
                                "metadata": {"name": pod, "namespace": namespace}}
        if self.grace_period_s is not None:
            body["deleteOptions"] = {"gracePeriodSeconds": self.grace_period_s}
        # A plain dict body: the client's V1Eviction would say policy/v1, which a 1.20-1.21 apiserver refuses.
        self.core.create_namespaced_pod_eviction(pod, namespace, body, _preload_content=False).release_conn()

    def _gone(self, namespace: str, pod: str) -> bool:
        try:
            found = self.core.read_namespaced_pod(pod, namespace)
        except ApiException as exc:
            if exc.status == 404:
                return True
            raise SourceUnavailable(f"kubernetes: read pod {namespace}/{pod} -> HTTP {exc.status} {exc.reason}",
                                    retryable=False, status=exc.status) from exc
        return found.metadata.deletion_timestamp is not None or found.status.phase in ("Succeeded", "Failed")


class RayJobStop:
    """Stop Ray jobs through the dashboard's Jobs REST API (``/api/jobs/{submission_id}/stop``)."""

    def __init__(self, base_url: str, *, dry_run: bool = True, headers: Mapping[str, str] | None = None,
                 transport: httpx.BaseTransport | None = None, timeout: float = 30.0) -> None:
        self.dry_run = dry_run
        self.client = JsonClient(base_url, name="ray", transport=transport, timeout=timeout,
                                 headers=dict(headers or {}))

    def stop(self, submission_id: str) -> ActionResult:
        request = f"POST /api/jobs/{submission_id}/stop"
        if self.dry_run:
            return ActionResult("stop", submission_id, True, False, request, f"dry run: would stop {submission_id}")
        status = self.status(submission_id)
        if status in RAY_TERMINAL:
            return ActionResult("stop", submission_id, False, False, request, f"{submission_id} is already {status}")
        response = self.client.request("POST", f"/api/jobs/{submission_id}/stop")
        check_status("ray", response)
        return ActionResult("stop", submission_id, False, True, request, f"{submission_id} stopped (was {status})")

    def status(self, submission_id: str) -> str:
        doc = self.client.get_json(f"/api/jobs/{submission_id}")
        if not isinstance(doc, dict) or "status" not in doc:
            raise SourceUnavailable(f"ray: no status for job {submission_id}", retryable=False)
        return str(doc["status"])

    def close(self) -> None:
        self.client.close()
