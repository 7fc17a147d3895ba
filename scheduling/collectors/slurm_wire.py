"""slurmrestd v0.0.40-v0.0.42 (Slurm 23.x/24.x) objects in the v0.0.36-v0.0.38 shape the parsers read.

From v0.0.40 on, slurmrestd changed three things the 22.05 parsers depend on, each of which would make
them silently match nothing rather than fail:

- states are lists: a node is ``["IDLE", "DRAIN"]`` (base state, then flags) instead of ``"idle"`` plus
  ``state_flags``; a job is ``["RUNNING"]`` or ``["RUNNING", "COMPLETING"]`` instead of ``"RUNNING"``;
- numbers are ``{"set": bool, "infinite": bool, "number": n}`` (unset or infinite means "no value");
- partitions nest their fields (``nodes.configured``, ``partition.state``, ``priority.tier``), and
  v0.0.41 moved a job's node list to ``job_resources.nodes.allocation[].name``.

Each ``*_v38`` function takes one object of either generation and returns the older shape (an older
object comes back unchanged), so one parser serves every version and a recorded 22.05 answer and a 24.11
answer are read by the same code.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# Slurm's base node states; anything else in a v0.0.40+ state list is a flag (DRAIN, NOT_RESPONDING...).
NODE_BASE_STATES = frozenset({"IDLE", "DOWN", "ALLOCATED", "ERROR", "MIXED", "FUTURE", "UNKNOWN"})
# A job flag that the older single-string state reported instead of the base state.
JOB_STATE_FLAGS_SHOWN = ("COMPLETING", "CONFIGURING")


def is_number_struct(value: Any) -> bool:
    return isinstance(value, Mapping) and "number" in value and "set" in value


def number(value: Any) -> Any:
    """``{set, infinite, number}`` -> the number, or ``None`` when unset or infinite; anything else as is."""
    if not is_number_struct(value):
        return value
    if not value.get("set") or value.get("infinite"):
        return None
    return value.get("number")


def _numbers_unwrapped(raw: Mapping[str, Any]) -> dict[str, Any]:
    return {key: number(value) for key, value in raw.items()}


def node_v38(raw: Mapping[str, Any]) -> dict[str, Any]:
    """A v0.0.40+ node (``state`` a list) as a v0.0.38 one (lower-case base state + ``state_flags``)."""
    out = _numbers_unwrapped(raw)
    states = raw.get("state")
    if isinstance(states, list):
        upper = [str(s).upper() for s in states]
        base = next((s for s in upper if s in NODE_BASE_STATES), "UNKNOWN")
        out["state"] = base.lower()
        out["state_flags"] = [s for s in upper if s != base]
    return out


def job_state(states: Any) -> str:
    """``["RUNNING", "COMPLETING"]`` -> ``"COMPLETING"``, ``["PENDING"]`` -> ``"PENDING"``: what the older
    single string said (a completing job still holds its nodes, which the parsers count as running)."""
    if not isinstance(states, list):
        return str(states)
    upper = [str(s).upper() for s in states]
    shown = next((flag for flag in JOB_STATE_FLAGS_SHOWN if flag in upper), None)
    return shown or (upper[0] if upper else "UNKNOWN")


def _allocated_nodes(resources: Any) -> Any:
    """v0.0.41+ ``job_resources.nodes.allocation[].name`` -> v0.0.38's ``allocated_nodes[].nodename``."""
    if not isinstance(resources, Mapping) or not isinstance(resources.get("nodes"), Mapping):
        return resources
    allocation = resources["nodes"].get("allocation") or []
    return {
        **resources,
        "nodes": resources["nodes"].get("list", ""),
        "allocated_nodes": [{"nodename": a.get("name")} for a in allocation if isinstance(a, Mapping)],
    }


def job_v38(raw: Mapping[str, Any]) -> dict[str, Any]:
    """A v0.0.40+ job as a v0.0.38 one: state string, plain numbers, v0.0.38 ``job_resources``."""
    out = _numbers_unwrapped(raw)
    if "job_state" in raw:
        out["job_state"] = job_state(raw["job_state"])
    if "job_resources" in raw:
        out["job_resources"] = _allocated_nodes(raw["job_resources"])
    return out


def partition_v38(raw: Mapping[str, Any]) -> dict[str, Any]:
    """A v0.0.40+ partition (nested ``nodes``/``partition``/``priority``) as a v0.0.38 one."""
    nodes = raw.get("nodes")
    if not isinstance(nodes, Mapping):
        return dict(raw)
    states = (raw.get("partition") or {}).get("state") or []
    return {
        **raw,
        "nodes": nodes.get("configured", ""),
        "state": ",".join(str(s) for s in states) if isinstance(states, list) else str(states),
        "priority_tier": number((raw.get("priority") or {}).get("tier")) or 0,
    }
