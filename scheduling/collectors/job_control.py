"""A user's own lever on a job (issue 33 item 14): cancel it, hold it before it starts, release the hold.

    Slurm       cancel ``scancel <job>``; hold ``scontrol hold <job>`` (pending jobs only: Slurm refuses to hold a
                running one); release ``scontrol release <job>``
    Kubernetes  cancel: evict the workload's pods (a pod, or every pod of a gang) through the Eviction API, as
                reclaim does, so PodDisruptionBudgets hold. No hold yet: the portal
                collects pods, and a suspended Job (``spec.suspend``) has none, so the held job would vanish
                from the portal with nothing left to release it from
    Ray         cancel: the dashboard's Jobs API stop (``RayJobStop``); Ray has no hold

Plain arguments in, ``ActionResult`` out, as every actuator (``collectors/actuators.py``). Each verb reads the job
first and answers ``changed=False`` when it is already in the state asked for, so a retried task never acts twice.
"""

from __future__ import annotations

import re
import shlex
import subprocess
from collections.abc import Mapping

from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from .actuators import ActionResult, Runner
from .errors import SourceUnavailable
from .reclaim_actuators import RAY_TERMINAL, KubernetesEviction, RayJobStop, SlurmRequeue, workload_pods

_JOB_REASON = re.compile(r"\bReason=(\S+)")
SLURM_ENDED = frozenset({"COMPLETED", "CANCELLED", "FAILED", "TIMEOUT", "PREEMPTED", "NODE_FAIL", "OUT_OF_MEMORY",
                         "BOOT_FAIL", "DEADLINE"})
SLURM_HOLD_REASONS = frozenset({"JobHeldUser", "JobHeldAdmin"})
VERBS = ("cancel", "hold", "release")


def _slurm_id(job_id: str) -> str:
    if not job_id.isdigit() and not re.fullmatch(r"\d+_\d+", job_id):
        raise ValueError(f"job_id: a Slurm job id (digits, or array_task), got {job_id!r}")
    return job_id


class SlurmJobControl(SlurmRequeue):
    """``scancel`` beside ``scontrol`` (the same client directory, the same ``SLURM_CONF``)."""

    def __init__(self, *, dry_run: bool = True, scontrol: str = "scontrol", scancel: str = "scancel",
                 env: Mapping[str, str] | None = None, runner: Runner = subprocess.run, timeout: float = 30.0) -> None:
        super().__init__(dry_run=dry_run, scontrol=scontrol, env=env, runner=runner, timeout=timeout)
        self.scancel = scancel

    def job_reason(self, job_id: str) -> str:
        """Why a pending job waits (``JobHeldAdmin``, ``BeginTime``, ``Resources``...); "" once Slurm forgot it."""
        return self._job_field(job_id, _JOB_REASON, "Reason", gone="")

    def cancel(self, job_id: str) -> ActionResult:
        job_id = _slurm_id(job_id)
        command = shlex.join([self.scancel, job_id])
        if self.dry_run:
            return ActionResult("cancel", job_id, True, False, command, f"dry run: would cancel job {job_id}")
        state = self.job_state(job_id)
        if state in SLURM_ENDED:
            return ActionResult("cancel", job_id, False, False, command, f"job {job_id} has already ended ({state})")
        self._call([self.scancel, job_id])
        return ActionResult("cancel", job_id, False, True, command, f"job {job_id} cancelled (was {state})")

    def hold(self, job_id: str) -> ActionResult:
        return self._hold_or_release(_slurm_id(job_id), hold=True)

    def release(self, job_id: str) -> ActionResult:
        return self._hold_or_release(_slurm_id(job_id), hold=False)

    def _hold_or_release(self, job_id: str, *, hold: bool) -> ActionResult:
        verb = "hold" if hold else "release"
        command = shlex.join([self.scontrol, verb, job_id])
        if self.dry_run:
            return ActionResult(verb, job_id, True, False, command, f"dry run: would {verb} job {job_id}")
        state = self.job_state(job_id)
        if state != "PENDING":
            if not hold:
                return ActionResult(verb, job_id, False, False, command, f"job {job_id} is {state}: nothing held")
            raise SourceUnavailable(f"job {job_id} is {state}: Slurm holds only pending jobs (cancel it instead)",
                                    retryable=False)
        held = self.job_reason(job_id) in SLURM_HOLD_REASONS
        if held == hold:
            return ActionResult(verb, job_id, False, False, command,
                                f"job {job_id} is {'already held' if hold else 'not held'}")
        self._run([verb, job_id])
        return ActionResult(verb, job_id, False, True, command, f"job {job_id} {'held' if hold else 'released'}")

    def _call(self, argv: list[str]) -> str:
        try:
            done = self.runner(argv, capture_output=True, text=True, env=self.env, timeout=self.timeout, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise SourceUnavailable(f"{shlex.join(argv)}: {exc}") from exc
        if done.returncode != 0:
            raise SourceUnavailable(f"{shlex.join(argv)} -> {done.returncode}: {done.stderr.strip()}", retryable=False)
        return str(done.stdout)


class KubernetesJobControl:
    """Cancel a workload by evicting its pods through the Eviction API, as reclaim does: a PodDisruptionBudget
    holds (a refused eviction is reported), and the portal's role needs no ``pods delete``. Its owner (a Job, a
    ReplicaSet) may create new pods: the confirmation page says so."""

    def __init__(self, api_client: k8s.ApiClient, *, dry_run: bool = True) -> None:
        self.core = k8s.CoreV1Api(api_client)
        self.dry_run = dry_run
        self.eviction = KubernetesEviction(api_client, dry_run=dry_run)

    def pods_of(self, external_id: str) -> tuple[str, list]:
        """(namespace, pods) of a collected workload: ``ns/pod/<name>`` one pod, ``ns/<group>`` a gang's pods."""
        namespace, name, group = workload_pods(external_id)
        if not name:
            return namespace, self.eviction.gang_pods(namespace, group)
        try:
            return namespace, [self.core.read_namespaced_pod(name, namespace)]
        except ApiException as exc:
            if exc.status == 404:
                return namespace, []
            raise self._unavailable(f"read pod {namespace}/{name}", exc) from exc

    def cancel(self, external_id: str) -> ActionResult:
        namespace, pods = self.pods_of(external_id)
        live = [p.metadata.name for p in pods if p.metadata.deletion_timestamp is None]
        request = "; ".join(f"POST /api/v1/namespaces/{namespace}/pods/{name}/eviction" for name in live) or "(none)"
        if self.dry_run:
            return ActionResult("cancel", external_id, True, False, request, f"dry run: would evict {len(live)} pods")
        if not live:
            return ActionResult("cancel", external_id, False, False, request, f"{external_id} has no pod left")
        results = [self.eviction.evict(namespace, name) for name in live]
        evicted = sum(result.changed for result in results)
        refused = [result.target for result in results if "PodDisruptionBudget" in result.message]
        message = f"evicted {evicted} pod{'' if evicted == 1 else 's'} of {external_id}"
        if refused:
            message += f"; a PodDisruptionBudget refused {', '.join(refused)}"
            if not evicted:  # nothing happened: the action fails and its requester is told why
                raise SourceUnavailable(f"kubernetes: cancel {external_id}: {message}", retryable=False, status=429)
        return ActionResult("cancel", external_id, False, evicted > 0, request, message)

    @staticmethod
    def _unavailable(what: str, exc: ApiException) -> SourceUnavailable:
        return SourceUnavailable(f"kubernetes: {what} -> HTTP {exc.status} {exc.reason}",
                                 retryable=exc.status in (500, 503), status=exc.status)


class RayJobControl:
    """Ray's only lever on a job is to stop it (the Jobs API): no hold."""

    def __init__(self, stopper: RayJobStop) -> None:
        self.stopper = stopper

    def cancel(self, submission_id: str) -> ActionResult:
        try:
            return self.stopper.stop(submission_id)
        finally:
            self.stopper.close()

    def status(self, submission_id: str) -> str:
        return self.stopper.status(submission_id)


__all__ = ["RAY_TERMINAL", "VERBS", "KubernetesJobControl", "RayJobControl", "SlurmJobControl"]
