"""``--pools FILE.toml``: partitions and their queue rules, as a Slurm site would describe them.

A list of ``[[pool]]`` tables (docs/simulator.md has the full format)::

    [[pool]]
    name = "A"
    nodes = "dgx[01-08]"   # Slurm hostlist over the fleet's names; or count = 8 (and gpu_model = "H100")
    teams = ["A"]          # or kinds = ["slurm"]; neither = every job
    queue = "fifo"         # fifo | fairshare | priority
    backfill = "easy"      # none | easy
    backfill_depth = 2000  # jobs tested per pass (Slurm bf_max_job_test)
    reservation = "earliest"  # earliest | slurm-22.05: how the blocked head's start is planned
    nodes_shared = true    # false = whole nodes per job (Slurm --exclusive)
    preemption = false
    placement = "best-fit" # optional: any engine placement policy

A job goes to the first pool (file order) whose ``teams`` holds its team or whose ``kinds`` holds its
orchestrator; a job that matches no pool is an error (or, with ``on_error="skip"``, skipped and counted),
never silently the first pool. Every error names the file, the line of the offending key and the key.
"""

from __future__ import annotations

import re
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scheduling.collectors.hostlist import expand_hostlist
from scheduling.engine.backfill import RESERVATIONS
from scheduling.engine.placement import POLICIES
from scheduling.engine.types import Node
from scheduling.simulation.fleet import ORCHESTRATORS
from scheduling.simulation.pools import PoolSpec
from scheduling.wording import plural

QUEUES = ("fifo", "fairshare", "priority")
BACKFILLS = ("none", "easy")
KEYS = frozenset(
    {
        "name", "nodes", "count", "gpu_model", "teams", "kinds", "queue", "backfill", "backfill_depth",
        "nodes_shared", "preemption", "placement", "reservation",
    }
)  # fmt: skip
DEFAULT_BACKFILL_DEPTH = 200


class PoolFileError(ValueError):
    """A pool file that cannot describe pools on this fleet; the message names file, line and key."""


@dataclass(frozen=True)
class PoolRule:
    """One pool as read, before its nodes are resolved against a fleet."""

    name: str
    line: int
    nodes: str | None
    count: int | None
    gpu_model: str | None
    teams: frozenset[str]
    kinds: frozenset[str]
    queue: str
    backfill: str
    backfill_depth: int
    reservation: str
    nodes_shared: bool
    preemption: bool
    placement: str

    def matches(self, team: str, orchestrator: str) -> bool:
        if not self.teams and not self.kinds:
            return True
        return team in self.teams or orchestrator in self.kinds


@dataclass(frozen=True)
class PoolPlan:
    """Pools resolved on a fleet, and the rule that routes each job to one of them."""

    path: str
    rules: tuple[PoolRule, ...]
    specs: tuple[PoolSpec, ...]

    def route(self, team: str, orchestrator: str) -> str | None:
        return next((rule.name for rule in self.rules if rule.matches(team, orchestrator)), None)

    @property
    def needs_fair_share(self) -> bool:
        return any(rule.queue == "fairshare" or rule.preemption for rule in self.rules)


class _Located:
    """Line numbers of the keys of each ``[[pool]]`` table (tomllib keeps none)."""

    def __init__(self, path: str, text: str) -> None:
        self.path = path
        self.tables: list[tuple[int, dict[str, int]]] = []
        for number, line in enumerate(text.splitlines(), start=1):
            stripped = line.strip()
            if re.match(r"^\[\[\s*pool\s*\]\]", stripped):
                self.tables.append((number, {}))
            elif self.tables and (match := re.match(r"^([A-Za-z_][A-Za-z0-9_-]*)\s*=", stripped)):
                self.tables[-1][1].setdefault(match.group(1), number)

    def keys(self, index: int) -> dict[str, int]:
        return self.tables[index][1] if index < len(self.tables) else {}

    def error(self, index: int, key: str, message: str, name: str = "") -> PoolFileError:
        header, keys = self.tables[index] if index < len(self.tables) else (1, {})
        label = f"pool {name!r}" if name else f"pool #{index + 1}"
        return PoolFileError(f"{self.path}:{keys.get(key, header)}: {label}: key '{key}': {message}")


def read_pool_file(path: str | Path) -> tuple[PoolRule, ...]:
    """The pools of ``path``; raises :class:`PoolFileError` (or FileNotFoundError) on anything wrong."""
    file = Path(path)
    if not file.is_file():
        raise FileNotFoundError(f"pool file not found: {file}")
    text = file.read_text(encoding="utf-8")
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise PoolFileError(f"{file}: not valid TOML: {error}") from None
    located = _Located(str(file), text)
    tables = data.get("pool")
    unknown = sorted(set(data) - {"pool"})
    if unknown:
        raise PoolFileError(f"{file}:1: unknown top-level key(s) {', '.join(unknown)}; expected [[pool]] tables")
    if not isinstance(tables, list) or not tables:
        raise PoolFileError(f"{file}:1: no [[pool]] tables")
    rules = tuple(_rule(located, index, table) for index, table in enumerate(tables))
    names = [rule.name for rule in rules]
    for index, name in enumerate(names):
        if name in names[:index]:
            raise located.error(index, "name", f"duplicate pool name {name!r}", name)
    return rules


def _rule(located: _Located, index: int, table: dict[str, Any]) -> PoolRule:
    def fail(key: str, message: str) -> PoolFileError:
        return located.error(index, key, message, str(table.get("name", "")))

    for key in table:
        if key not in KEYS:
            raise fail(key, f"unknown key; expected one of {', '.join(sorted(KEYS))}")
    name = table.get("name")
    if not isinstance(name, str) or not name.strip():
        raise fail("name", "a non-empty string is required")
    nodes, count = table.get("nodes"), table.get("count")
    if isinstance(nodes, int) and not isinstance(nodes, bool) and count is None:
        nodes, count = None, nodes  # nodes = 8 is a count
    if (nodes is None) == (count is None):
        raise fail("nodes", 'give either nodes = "host[01-08]" (a Slurm hostlist) or count = N')
    if nodes is not None and (not isinstance(nodes, str) or not nodes.strip()):
        raise fail("nodes", 'a Slurm hostlist string is required, e.g. "dgx[01-08]"')
    if count is not None and (not isinstance(count, int) or isinstance(count, bool) or count < 1):
        raise fail("count", f"a whole number of nodes >= 1 is required, got {count!r}")
    gpu_model = table.get("gpu_model")
    if gpu_model is not None and (count is None or not isinstance(gpu_model, str)):
        raise fail("gpu_model", "a model string, only with count = N")
    return PoolRule(
        name=name.strip(),
        line=located.tables[index][0] if index < len(located.tables) else 1,
        nodes=nodes,
        count=count,
        gpu_model=gpu_model,
        teams=_strings(table, "teams", fail),
        kinds=_kinds(table, fail),
        queue=_choice(table, "queue", QUEUES, "fifo", fail),
        backfill=_choice(table, "backfill", BACKFILLS, "easy", fail),
        backfill_depth=_depth(table, fail),
        reservation=_choice(table, "reservation", RESERVATIONS, "earliest", fail),
        nodes_shared=_flag(table, "nodes_shared", True, fail),
        preemption=_flag(table, "preemption", False, fail),
        placement=_choice(table, "placement", POLICIES, "best-fit", fail),
    )


def _strings(table: dict[str, Any], key: str, fail: Any) -> frozenset[str]:
    value = table.get(key, [])
    if not isinstance(value, list) or not all(isinstance(item, str) and item for item in value):
        raise fail(key, "a list of non-empty strings is required")
    return frozenset(value)


def _kinds(table: dict[str, Any], fail: Any) -> frozenset[str]:
    kinds = _strings(table, "kinds", fail)
    wrong = sorted(kinds - set(ORCHESTRATORS))
    if wrong:
        raise fail("kinds", f"{', '.join(wrong)} not one of {', '.join(ORCHESTRATORS)}")
    return kinds


def _choice(table: dict[str, Any], key: str, choices: Sequence[str], default: str, fail: Any) -> str:
    value = table.get(key, default)
    if value not in choices:
        raise fail(key, f"{value!r} is not one of {', '.join(choices)}")
    return str(value)


def _depth(table: dict[str, Any], fail: Any) -> int:
    value = table.get("backfill_depth", DEFAULT_BACKFILL_DEPTH)
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise fail("backfill_depth", f"a whole number >= 1 is required, got {value!r}")
    return value


def _flag(table: dict[str, Any], key: str, default: bool, fail: Any) -> bool:
    value = table.get(key, default)
    if not isinstance(value, bool):
        raise fail(key, f"true or false is required, got {value!r}")
    return value


def plan_pools(path: str | Path, fleet: Sequence[Node]) -> PoolPlan:
    """Resolve the pool file's node selectors on ``fleet``: each node in at most one pool."""
    rules = read_pool_file(path)
    text = Path(path).read_text(encoding="utf-8")
    located = _Located(str(path), text)
    by_name = {node.name: node for node in fleet}
    taken: dict[str, str] = {}
    specs: list[PoolSpec] = []
    for index, rule in enumerate(rules):
        if rule.nodes is not None:
            names = _hostnames(located, index, rule)
            missing = [name for name in names if name not in by_name]
            if missing:
                shown = ", ".join(missing[:5]) + (" ..." if len(missing) > 5 else "")
                unknown = f"{plural(len(missing), 'node')} not in the fleet: {shown}"
                raise located.error(index, "nodes", unknown, rule.name)
        else:
            free = [n.name for n in fleet if n.name not in taken and rule.gpu_model in (None, n.gpu_model)]
            assert rule.count is not None
            if len(free) < rule.count:
                model = f"{rule.gpu_model} " if rule.gpu_model else ""
                message = f"asks for {rule.count} {model}nodes, {len(free)} left after earlier pools"
                key = "count" if "count" in located.keys(index) else "nodes"  # nodes = N is a count too
                raise located.error(index, key, message, rule.name)
            names = free[: rule.count]
        for name in names:
            if name in taken:
                raise located.error(index, "nodes", f"node {name} is already in pool {taken[name]!r}", rule.name)
            taken[name] = rule.name
        nodes = tuple(by_name[name] for name in names)
        if not any(node.gpu_total for node in nodes):
            raise located.error(index, "nodes", "the pool has no GPU", rule.name)
        specs.append(
            PoolSpec(
                rule.name,
                nodes,
                discipline="easy" if rule.backfill == "easy" else "fcfs",
                placement_policy=rule.placement,
                exclusive=not rule.nodes_shared,
                max_tests=rule.backfill_depth,
                preemption=rule.preemption,
                queue=rule.queue,
                reservation=rule.reservation,
            )
        )
    return PoolPlan(path=str(path), rules=rules, specs=tuple(specs))


def _hostnames(located: _Located, index: int, rule: PoolRule) -> list[str]:
    try:
        names = expand_hostlist(rule.nodes)
    except (ValueError, IndexError) as error:
        raise located.error(index, "nodes", f"not a Slurm hostlist: {error}", rule.name) from None
    if not names:
        raise located.error(index, "nodes", "the hostlist names no node", rule.name)
    return names
