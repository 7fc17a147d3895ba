"""Actuators: the few verbs the portal may apply to an orchestrator.

Every verb is **dry-run by default** (it reports the exact command or request it would send and
touches nothing) and **idempotent** (applied for real, it first reads the current state and answers
``changed=False`` when there is nothing to do, so a retried Celery task never acts twice).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import yaml
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from . import conditions
from .errors import MalformedResponse, SourceUnavailable
from .httpjson import JsonClient, check_status, require
from .slurm import jwt_headers

Runner = Callable[..., subprocess.CompletedProcess[str]]


@dataclass(frozen=True, slots=True)
class ActionResult:
    verb: str
    target: str
    dry_run: bool
    changed: bool
    command_or_request: str
    message: str


# --------------------------------------------------------------------------------------------- Slurm

_STATE = re.compile(r"\bState=(\S+)")
_REASON = re.compile(r"\bReason=(.*?)(?: \[[^\]]*\])?(?= \w+=|$)")


def parse_scontrol_node(line: str) -> tuple[str, set[str], str]:
    """(base state, flags, reason) from one ``scontrol show node -o`` line (``State=MIXED+DRAIN``)."""
    match = _STATE.search(line)
    if not match:
        raise SourceUnavailable(f"scontrol: no State= in {line[:120]!r}", retryable=False)
    base, *flags = match.group(1).split("+")
    reason = _REASON.search(line)
    return base.lower(), {f.upper() for f in flags}, (reason.group(1) if reason else "")


def _rest_updates_nodes(api_version: str) -> bool:
    """slurmrestd gained ``POST /slurm/vX/node/{name}`` in v0.0.39 (Slurm 23.02); 22.05's v0.0.36-38
    answer 405 there, so those versions must go through scontrol."""
    return tuple(int(p) for p in api_version.lstrip("v").split(".")) >= (0, 0, 39)


class SlurmActuator:
    """drain/resume Slurm nodes: over REST where slurmrestd supports node updates, else with
    ``scontrol update`` (needs the Slurm client and a reachable ``SLURM_CONF`` in ``env``)."""

    def __init__(  # nosec B107 - an empty token means "no REST access", not a default secret
        self,
        base_url: str | None = None,
        token: str = "",
        user: str = "",
        api_version: str = "v0.0.38",
        transport: httpx.BaseTransport | None = None,
        *,
        dry_run: bool = True,
        scontrol: str = "scontrol",
        env: Mapping[str, str] | None = None,
        runner: Runner = subprocess.run,
        timeout: float = 30.0,
    ) -> None:
        self.api_version = api_version
        self.dry_run = dry_run
        self.scontrol = scontrol
        self.env = {**os.environ, **(env or {})}
        self.runner = runner
        self.timeout = timeout
        self.use_rest = bool(base_url) and _rest_updates_nodes(api_version)
        self.client = (
            JsonClient(
                base_url,
                name="slurm",
                transport=transport,
                timeout=timeout,
                headers=jwt_headers(user, token),
            )
            if base_url
            else None
        )

    def drain(self, node: str, reason: str) -> ActionResult:
        if not reason.strip():
            raise ValueError("Slurm requires a reason to drain a node")
        return self._apply(
            "drain",
            node,
            {"state": "DRAIN", "reason": reason},
            ["update", f"nodename={node}", "state=drain", f"reason={reason}"],
            done=lambda flags, current: conditions.slurm_drain_requested(flags) and current == reason,
        )

    def resume(self, node: str) -> ActionResult:
        return self._apply(
            "resume",
            node,
            {"state": "RESUME"},
            ["update", f"nodename={node}", "state=resume"],
            done=lambda flags, _reason: not conditions.slurm_drain_requested(flags),
        )

    def _apply(
        self,
        verb: str,
        node: str,
        body: dict[str, str],
        args: list[str],
        done: Callable[[set[str], str], bool],
    ) -> ActionResult:
        command = self._describe(node, body, args)
        if self.dry_run:
            return ActionResult(verb, node, True, False, command, f"dry run: would {verb} {node}")
        _base, flags, reason = self.node_state(node)
        if done(flags, reason):
            return ActionResult(verb, node, False, False, command, f"{node} already in the wanted state")
        if self.use_rest:
            self._rest_update(node, body)
        else:
            self._scontrol(args)
        return ActionResult(verb, node, False, True, command, f"{verb} applied to {node}")

    def _describe(self, node: str, body: dict[str, str], args: list[str]) -> str:
        if self.use_rest:
            return f"POST /slurm/{self.api_version}/node/{node} {json.dumps(body)}"
        return shlex.join([self.scontrol, *args])

    def node_state(self, node: str) -> tuple[str, set[str], str]:
        """(base state, flags, reason) of one node, read the same way the verb will be applied."""
        if self.use_rest and self.client is not None:
            doc = self.client.get_json(f"/slurm/{self.api_version}/node/{node}")
            nodes = require(doc, "nodes", (list,), f"slurm node {node}")
            if not nodes or not isinstance(nodes[0], dict) or "state" not in nodes[0]:
                raise MalformedResponse(f"slurm node {node}: no node record in the answer")
            raw = nodes[0]
            flags = {str(f).upper() for f in raw.get("state_flags") or ()}
            return str(raw["state"]).lower(), flags, str(raw.get("reason") or "")
        return parse_scontrol_node(self._scontrol(["show", "node", node, "-o"]))

    def _rest_update(self, node: str, body: dict[str, str]) -> None:
        assert self.client is not None
        response = self.client.request("POST", f"/slurm/{self.api_version}/node/{node}", json=body)
        check_status("slurm", response)

    def _scontrol(self, args: Sequence[str]) -> str:
        try:
            done = self.runner(
                [self.scontrol, *args],
                capture_output=True,
                text=True,
                env=self.env,
                timeout=self.timeout,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise SourceUnavailable(f"scontrol {' '.join(args)}: {exc}") from exc
        if done.returncode != 0:
            raise SourceUnavailable(
                f"scontrol {' '.join(args)} -> {done.returncode}: {done.stderr.strip()}", retryable=False
            )
        return done.stdout


# ---------------------------------------------------------------------------------------- Kubernetes


def taint_identity(taint: dict[str, Any]) -> tuple[str, str, str]:
    """(key, value, effect) as the apiserver means it: it omits an empty value, so missing is ``""``."""
    return str(taint.get("key") or ""), str(taint.get("value") or ""), str(taint.get("effect") or "")


def taints_after(
    current: list[dict[str, Any]], key: str, value: str, effect: str, remove: bool
) -> list[dict[str, Any]]:
    """The node's taint list with ``key:effect`` set (or removed); other taints kept as they are and
    where they are (a taint already present is replaced in place, so re-applying it reorders nothing).
    The whole list is sent because Node taints have no merge key in a strategic-merge patch."""
    same = [(t.get("key"), t.get("effect")) == (key, effect) for t in current]
    if remove:
        return [t for t, matched in zip(current, same, strict=True) if not matched]
    wanted = {"key": key, "value": value, "effect": effect} if value else {"key": key, "effect": effect}
    result: list[dict[str, Any]] = []
    placed = False
    for taint, matched in zip(current, same, strict=True):
        if not matched:
            result.append(taint)
        elif not placed:  # the apiserver keeps key:effect unique; an unchanged entry stays its own
            result.append(taint if taint_identity(taint) == (key, value, effect) else wanted)
            placed = True
    return result if placed else [*result, wanted]


class KubernetesActuator:
    """label / taint / cordon / uncordon a node with the official client (``patch_node``)."""

    def __init__(self, api_client: k8s.ApiClient, *, dry_run: bool = True) -> None:
        self.core = k8s.CoreV1Api(api_client)
        self.dry_run = dry_run

    def label(self, node: str, key: str, value: str | None) -> ActionResult:
        """Set ``key=value`` (``None`` removes the label)."""
        patch = {"metadata": {"labels": {key: value}}}
        return self._patch("label", node, patch, lambda raw: (raw["metadata"].get("labels") or {}).get(key) == value)

    def cordon(self, node: str) -> ActionResult:
        return self._patch(
            "cordon",
            node,
            {"spec": {"unschedulable": True}},
            lambda raw: bool(raw.get("spec", {}).get("unschedulable")),
        )

    def uncordon(self, node: str) -> ActionResult:
        return self._patch(
            "uncordon",
            node,
            {"spec": {"unschedulable": None}},
            lambda raw: not raw.get("spec", {}).get("unschedulable"),
        )

    def taint(
        self, node: str, key: str, value: str = "", effect: str = "NoSchedule", remove: bool = False
    ) -> ActionResult:
        verb = "untaint" if remove else "taint"
        if self.dry_run:
            request = f"PATCH /api/v1/nodes/{node} spec.taints {'-' if remove else '+'}{key}={value}:{effect}"
            return ActionResult(verb, node, True, False, request, f"dry run: would {verb} {node}")
        raw = self._read(node)
        current = raw.get("spec", {}).get("taints") or []
        wanted = taints_after(current, key, value, effect, remove)
        patch = {"spec": {"taints": wanted}}
        unchanged = [taint_identity(t) for t in wanted] == [taint_identity(t) for t in current]
        return self._patch(verb, node, patch, lambda _raw: unchanged, raw=raw)

    def _patch(
        self,
        verb: str,
        node: str,
        patch: dict[str, Any],
        done: Callable[[dict[str, Any]], bool],
        raw: dict[str, Any] | None = None,
    ) -> ActionResult:
        request = f"PATCH /api/v1/nodes/{node} {json.dumps(patch, sort_keys=True)}"
        if self.dry_run:
            return ActionResult(verb, node, True, False, request, f"dry run: would {verb} {node}")
        if done(raw if raw is not None else self._read(node)):
            return ActionResult(verb, node, False, False, request, f"{node} already in the wanted state")
        try:
            self.core.patch_node(node, patch)
        except ApiException as exc:
            raise SourceUnavailable(
                f"kubernetes: patch node {node} -> HTTP {exc.status} {exc.reason}",
                retryable=False,
                status=exc.status,
            ) from exc
        return ActionResult(verb, node, False, True, request, f"{verb} applied to {node}")

    def _read(self, node: str) -> dict[str, Any]:
        try:
            response = self.core.read_node(node, _preload_content=False)
        except ApiException as exc:
            raise SourceUnavailable(
                f"kubernetes: read node {node} -> HTTP {exc.status} {exc.reason}",
                retryable=False,
                status=exc.status,
            ) from exc
        return dict(json.loads(response.data))


# ----------------------------------------------------------------------------------------------- Ray


class RayActuator:
    """Bounds Ray's autoscaler (``min_workers``/``max_workers`` of a node type) by editing the cluster
    config YAML that ``ray up`` reads. A Ray cluster started by hand (``ray start``) has no autoscaler
    config: then the portal can only observe it, and says so instead of pretending."""

    def __init__(self, autoscaler_config: str | Path | None = None, *, dry_run: bool = True) -> None:
        self.config = Path(autoscaler_config) if autoscaler_config else None
        self.dry_run = dry_run

    @property
    def observe_only(self) -> bool:
        return self.config is None or not self.config.is_file()

    def set_bounds(self, node_type: str, min_workers: int, max_workers: int) -> ActionResult:
        if not 0 <= min_workers <= max_workers:
            raise ValueError("need 0 <= min_workers <= max_workers")
        target = f"{self.config}:{node_type}" if self.config else node_type
        request = f"set available_node_types.{node_type} min_workers={min_workers} max_workers={max_workers}"
        if self.observe_only:
            return ActionResult(
                "set_bounds",
                target,
                self.dry_run,
                False,
                request,
                "observe only: no autoscaler config reachable for this Ray cluster",
            )
        assert self.config is not None
        document = yaml.safe_load(self.config.read_text()) or {}
        node_types = document.get("available_node_types") or {}
        if node_type not in node_types:
            raise ValueError(f"{node_type!r} is not in available_node_types of {self.config}")
        entry = node_types[node_type]
        if (entry.get("min_workers"), entry.get("max_workers")) == (min_workers, max_workers):
            return ActionResult("set_bounds", target, self.dry_run, False, request, "bounds already set")
        if self.dry_run:
            return ActionResult("set_bounds", target, True, False, request, "dry run: config not written")
        entry["min_workers"], entry["max_workers"] = min_workers, max_workers
        self.config.write_text(yaml.safe_dump(document, sort_keys=False))
        return ActionResult(
            "set_bounds",
            target,
            False,
            True,
            request,
            "config written; the autoscaler applies it on its next update",
        )
