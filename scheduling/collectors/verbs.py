"""What applying a rebalance move asks of one orchestrator: release a node, take it, and read back whether
that happened. Plain arguments in (node names, an endpoint and token, an API client, a config path); no
Django and no ORM rows. ``services/orchestrators.py`` builds them from an Orchestrator row and
``services/rebalance.py`` calls them for each move. Every verb is idempotent and returns the command or
request it sent (or, in a dry run, would send).

    release:  Slurm drain          | Kubernetes cordon + taint            | Ray max bound lowered
    take:     Slurm resume         | Kubernetes label + untaint + uncordon | Ray bound raised
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from kubernetes import client as k8s

from . import conditions
from .actuators import KubernetesActuator, RayActuator, SlurmActuator

DRAIN_TAINT = "gpuportal.io/rebalance"
POOL_LABEL = "gpuportal.io/pool"
FINISHED_POD_PHASES = ("Succeeded", "Failed")


class OrchestratorVerbs:
    """The verbs of one orchestrator. ``is_empty`` answers None where the orchestrator cannot say (the
    portal's own count of GPUs in use decides); the checks answer True where there is nothing to read."""

    def release(self, node: str, why: str) -> str:
        """Stop new work landing on the node here (work already running finishes)."""
        raise NotImplementedError

    def undo_release(self, node: str) -> str:
        raise NotImplementedError

    def take(self, node: str) -> str:
        """Start scheduling on the node here."""
        raise NotImplementedError

    def undo_take(self, node: str) -> str:
        raise NotImplementedError

    def is_empty(self, node: str) -> bool | None:
        return None

    def verify_released(self, node: str) -> bool:
        return True

    def verify_taken(self, node: str) -> bool:
        return True


class SlurmVerbs(OrchestratorVerbs):
    def __init__(  # nosec B107 - an empty token means "no REST access", not a default secret
        self,
        endpoint: str,
        token: str,
        user: str,
        api_version: str,
        *,
        dry_run: bool,
        slurm_conf: str | None = None,
    ) -> None:
        self.actuator = SlurmActuator(
            endpoint,
            token,
            user,
            api_version,
            dry_run=dry_run,
            env={"SLURM_CONF": slurm_conf} if slurm_conf else None,
        )

    def release(self, node: str, why: str) -> str:
        return self.actuator.drain(node, why).command_or_request

    def undo_release(self, node: str) -> str:
        return self.actuator.resume(node).command_or_request

    def take(self, node: str) -> str:
        return self.actuator.resume(node).command_or_request

    def undo_take(self, node: str) -> str:
        return self.actuator.drain(node, "gpuportal: rebalance rolled back").command_or_request

    def is_empty(self, node: str) -> bool:
        base, flags, _reason = self.actuator.node_state(node)
        return conditions.slurm_drained(base, flags)

    def verify_released(self, node: str) -> bool:
        return conditions.slurm_drain_requested(self.actuator.node_state(node)[1])

    def verify_taken(self, node: str) -> bool:
        return not conditions.slurm_drain_requested(self.actuator.node_state(node)[1])


class KubernetesVerbs(OrchestratorVerbs):
    """``owner``: the orchestrator's name, written to the node's pool label when it takes the node."""

    def __init__(self, api: k8s.ApiClient, owner: str, *, dry_run: bool) -> None:
        self.api, self.owner = api, owner
        self.actuator = KubernetesActuator(api, dry_run=dry_run)

    def release(self, node: str, why: str) -> str:
        cordon = self.actuator.cordon(node)
        taint = self.actuator.taint(node, DRAIN_TAINT, "draining")
        return f"{cordon.command_or_request}; {taint.command_or_request}"

    def undo_release(self, node: str) -> str:
        taint = self.actuator.taint(node, DRAIN_TAINT, "draining", remove=True)
        return f"{taint.command_or_request}; {self.actuator.uncordon(node).command_or_request}"

    def is_empty(self, node: str) -> bool:
        """No pod left on the node but DaemonSet pods and finished ones."""
        pods = k8s.CoreV1Api(self.api).list_pod_for_all_namespaces(field_selector=f"spec.nodeName={node}")
        return not [
            p
            for p in pods.items
            if p.status.phase not in FINISHED_POD_PHASES
            and not any(ref.kind == "DaemonSet" for ref in (p.metadata.owner_references or ()))
        ]

    def take(self, node: str) -> str:
        label = self.actuator.label(node, POOL_LABEL, self.owner)
        taint = self.actuator.taint(node, DRAIN_TAINT, "draining", remove=True)
        return "; ".join(r.command_or_request for r in (label, taint, self.actuator.uncordon(node)))

    def undo_take(self, node: str) -> str:
        cordon = self.actuator.cordon(node)
        return f"{cordon.command_or_request}; {self.actuator.label(node, POOL_LABEL, None).command_or_request}"

    def _read(self, node: str) -> tuple[bool, dict]:
        raw = k8s.CoreV1Api(self.api).read_node(node)
        return bool(raw.spec.unschedulable), dict(raw.metadata.labels or {})

    def verify_released(self, node: str) -> bool:
        return self._read(node)[0]

    def verify_taken(self, node: str) -> bool:
        unschedulable, labels = self._read(node)
        return not unschedulable and labels.get(POOL_LABEL) == self.owner


class RayVerbs(OrchestratorVerbs):
    """Ray's autoscaler bound for the node type follows the nodes Ray owns (observe only without a config).
    ``owned`` counts them when a verb runs (a take runs once the node is already Ray's)."""

    def __init__(
        self, autoscaler_config: str | Path | None, node_type: str, owned: Callable[[], int], *, dry_run: bool
    ) -> None:
        self.node_type, self.owned = node_type, owned
        self.actuator = RayActuator(autoscaler_config, dry_run=dry_run)

    def _bound(self, delta: int) -> str:
        owned = self.owned()
        count = max(0, owned + delta)
        result = self.actuator.set_bounds(self.node_type, min(count, owned), count)
        return f"{result.command_or_request} ({result.message})"

    def release(self, node: str, why: str) -> str:
        return self._bound(-1)

    def undo_release(self, node: str) -> str:
        return self._bound(0)

    def take(self, node: str) -> str:
        return self._bound(0)

    def undo_take(self, node: str) -> str:
        return self._bound(-1)
