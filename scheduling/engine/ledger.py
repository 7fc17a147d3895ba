"""The GPU ledger: one owner per physical node, drift found and explained.

Pure functions over what every source last reported. ``detect`` joins each orchestrator's view of a
host to the fleet inventory (alias, then host name, then short host name, then GPU UUIDs), decides who
may schedule on each host and returns the drift conditions that hold *now*; ``reconcile`` turns those
conditions and the findings already on record into opened, updated and closed findings; and
``ownership_changes`` says which ownership intervals open and close.

Stale sources never produce findings: a source whose last good scrape is too old (or failed since)
is *unknown*, not *empty*. A host that a stale source last listed is neither orphaned nor cleared of
a double ownership while the source is stale: those findings are *held* (neither opened, updated nor
closed) until the source answers again. Times are epoch seconds passed in; nothing here reads a clock.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum


class FindingKind(StrEnum):
    DOUBLE_OWNERSHIP = "double_ownership"
    ORPHAN = "orphan"
    STUCK_TRANSITION = "stuck_transition"
    CAPACITY_MISMATCH = "capacity_mismatch"
    PHANTOM_ALLOCATION = "phantom_allocation"
    UNKNOWN_NODE = "unknown_node"


class Severity(StrEnum):
    HIGH = "high"
    MEDIUM = "medium"
    LOW = "low"


@dataclass(frozen=True, slots=True)
class Host:
    """A physical node of the inventory. ``pinned_to`` names the orchestrator a pinned node belongs to;
    ``expected_owner`` is the target of the latest applied plan that moved it (else its recorded owner)."""

    name: str
    gpu_total: int
    gpu_uuids: frozenset[str] = frozenset()
    pinned_to: str = ""
    expected_owner: str = ""
    expected_because: str = ""
    retired: bool = False  # decommissioned: owned by nobody is expected, not an orphan


@dataclass(frozen=True, slots=True)
class Alias:
    """``name`` in ``orchestrator`` is the inventory host ``host`` (hosts named differently per source)."""

    orchestrator: str
    name: str
    host: str


@dataclass(frozen=True, slots=True)
class SourceView:
    """One orchestrator's latest word on one node. ``schedulable`` follows the issue's rule for the
    source's kind (worked out by the caller); ``why_not`` says why not. ``gpu_backed`` is the GPUs that
    listed workloads hold there, ``None`` where the source does not say where its workloads run."""

    orchestrator: str
    name: str
    schedulable: bool
    gpu_total: int
    gpu_allocated: int = 0
    gpu_backed: float | None = None
    state: str = ""
    why_not: str = ""
    gpu_uuids: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class Source:
    """An orchestrator with its latest good views. ``fresh`` is false when its data is stale; ``has_data``
    is false when it never answered (then every host is unknown to it)."""

    name: str
    kind: str
    fresh: bool
    views: tuple[SourceView, ...] = ()
    has_data: bool = True


@dataclass(frozen=True, slots=True)
class PlanStep:
    """A node move of an approved or applying plan; ``since`` is when it entered ``state``."""

    move_id: int
    plan_id: int
    node: str
    source: str
    target: str
    state: str  # pending | draining | moved (handed over, not yet verified)
    since: float
    timeout_s: float


@dataclass(frozen=True, slots=True)
class LedgerConfig:
    orphan_after_s: float = 900.0
    phantom_after_s: float = 120.0
    phantom_min_gpus: float = 1.0


@dataclass(frozen=True, slots=True)
class Condition:
    """A drift that holds now. ``grace_s``: how long it must last before it is an open finding."""

    key: str
    kind: FindingKind
    severity: Severity
    node: str
    orchestrators: tuple[str, ...]
    explanation: str
    grace_s: float = 0.0


@dataclass(frozen=True, slots=True)
class HostOwnership:
    host: str
    owners: frozenset[str]  # fresh sources that may schedule on it now
    unknown: frozenset[str]  # stale sources that listed it last time (or never answered)
    in_inventory: bool = True


@dataclass(frozen=True, slots=True)
class Detection:
    conditions: tuple[Condition, ...]
    held: frozenset[tuple[FindingKind, str]]  # (kind, node) that cannot be decided this round
    stale_sources: frozenset[str]
    ownership: tuple[HostOwnership, ...]


@dataclass(frozen=True, slots=True)
class Finding:
    """A condition on record. ``opened_at`` is ``None`` while it waits out its grace (pending)."""

    key: str
    kind: FindingKind
    severity: Severity
    node: str
    orchestrators: tuple[str, ...]
    explanation: str
    first_seen: float
    last_seen: float
    opened_at: float | None = None


@dataclass(frozen=True, slots=True)
class Reconciliation:
    upserts: tuple[Finding, ...]  # new or changed (pending or open)
    newly_open: tuple[str, ...]  # keys that became open this round
    closed: tuple[str, ...]  # open keys whose condition cleared
    discarded: tuple[str, ...]  # pending keys that cleared before their grace ran out
    held: tuple[str, ...] = field(default=())


# ------------------------------------------------------------------------------------------- identity


class Identity:
    """Joins a source's node name to an inventory host: alias, exact name, short name, then GPU UUIDs."""

    def __init__(self, hosts: Iterable[Host], aliases: Iterable[Alias]) -> None:
        self.hosts = {h.name: h for h in hosts}
        self.aliases = {(a.orchestrator, a.name): a.host for a in aliases if a.host in self.hosts}
        short: dict[str, list[str]] = defaultdict(list)
        by_uuid: dict[str, list[str]] = defaultdict(list)
        for host in self.hosts.values():
            short[_short(host.name)].append(host.name)
            for uuid in host.gpu_uuids:
                by_uuid[uuid].append(host.name)
        self.short = {k: v[0] for k, v in short.items() if len(v) == 1}
        self.by_uuid = {k: v[0] for k, v in by_uuid.items() if len(v) == 1}

    def resolve(self, view: SourceView) -> str | None:
        alias = self.aliases.get((view.orchestrator, view.name))
        if alias is not None:
            return alias
        if view.name in self.hosts:
            return view.name
        by_short = self.short.get(_short(view.name))
        if by_short is not None:
            return by_short
        matches = {self.by_uuid[u] for u in view.gpu_uuids if u in self.by_uuid}
        return matches.pop() if len(matches) == 1 else None


def _short(name: str) -> str:
    return name.split(".", 1)[0].lower()


# ------------------------------------------------------------------------------------------ detection


@dataclass
class _HostViews:
    views: dict[str, SourceView] = field(default_factory=dict)  # orchestrator -> view (fresh sources)
    unknown: set[str] = field(default_factory=set)


def detect(
    hosts: Sequence[Host],
    aliases: Sequence[Alias],
    sources: Sequence[Source],
    steps: Sequence[PlanStep],
    now: float,
    config: LedgerConfig = LedgerConfig(),
) -> Detection:
    """Every drift condition that holds at ``now``, plus what cannot be decided (held)."""
    identity = Identity(hosts, aliases)
    stale = frozenset(s.name for s in sources if not s.fresh)
    blind = frozenset(s.name for s in sources if not s.fresh and not s.has_data)
    grouped: dict[str, _HostViews] = {name: _HostViews() for name in identity.hosts}
    conditions: list[Condition] = []
    for source in sources:
        for view in source.views:
            host = identity.resolve(view)
            if host is None:
                if view.gpu_total <= 0:
                    continue  # a CPU-only node outside the inventory (a control plane, a Ray head): not ours
                if source.fresh:
                    conditions.append(_unknown(view, source.kind))
                host = view.name  # still joined by name, so double ownership is caught before inventory is
            entry = grouped.setdefault(host, _HostViews())
            if source.fresh:
                known = entry.views.get(source.name)
                if known is None or not known.schedulable:  # two names for one host: any claim counts
                    entry.views[source.name] = view
                conditions.extend(_source_conditions(view, identity.hosts.get(host), host, config))
            else:
                entry.unknown.add(source.name)
    held: set[tuple[FindingKind, str]] = set()
    ownership = []
    moving = frozenset(s.node for s in steps)  # between owners on purpose: a stuck move is its own finding
    for name, entry in grouped.items():
        owners = frozenset(o for o, v in entry.views.items() if v.schedulable and v.gpu_total > 0)
        unknown = frozenset(entry.unknown | blind)
        ownership.append(HostOwnership(name, owners, unknown, name in identity.hosts))
        record = identity.hosts.get(name)
        found, undecided = _ownership_conditions(name, entry, owners, unknown, record, name in moving, config)
        conditions.extend(found)
        held.update((kind, name) for kind in undecided)
    conditions.extend(_stuck(step, now) for step in steps if _is_stuck(step, now))
    return Detection(tuple(conditions), frozenset(held), stale, tuple(ownership))


def _ownership_conditions(
    name: str,
    entry: _HostViews,
    owners: frozenset[str],
    unknown: frozenset[str],
    host: Host | None,
    moving: bool,
    config: LedgerConfig,
) -> tuple[list[Condition], list[FindingKind]]:
    found: list[Condition] = []
    undecided: list[FindingKind] = []
    if len(owners) >= 2:
        found.append(_double(name, entry, owners, host))
    elif len(owners) + len(unknown) >= 2:
        undecided.append(FindingKind.DOUBLE_OWNERSHIP)
    if not owners and not moving and not (host is not None and host.retired):
        if unknown:
            undecided.append(FindingKind.ORPHAN)
        else:
            found.append(_orphan(name, entry, host, config))
    return found, undecided


def _expectation(host: Host | None) -> str:
    if host is None:
        return "it is not in the fleet inventory"
    if host.pinned_to:
        return f"it is pinned to {host.pinned_to}"
    if host.expected_owner:
        because = f" ({host.expected_because})" if host.expected_because else ""
        return f"the portal expects {host.expected_owner}{because}"
    return "no owner is on record"


def _double(name: str, entry: _HostViews, owners: frozenset[str], host: Host | None) -> Condition:
    who = sorted(owners)
    states = "; ".join(f"{o}: {entry.views[o].state or 'schedulable'}" for o in who)
    keep = host.pinned_to or host.expected_owner if host else ""
    advice = (
        f"release it in {', '.join(o for o in who if o != keep)} (drain / cordon)"
        if keep in owners
        else "drain or cordon it in all but one of them"
    )
    return Condition(
        key=f"{FindingKind.DOUBLE_OWNERSHIP}:{name}",
        kind=FindingKind.DOUBLE_OWNERSHIP,
        severity=Severity.HIGH,
        node=name,
        orchestrators=tuple(who),
        explanation=(
            f"{name} is schedulable in {len(who)} orchestrators at once ({states}): two jobs can land on the "
            f"same GPUs. {_expectation(host).capitalize()}; {advice}."
        ),
    )


def _orphan(name: str, entry: _HostViews, host: Host | None, config: LedgerConfig) -> Condition:
    if entry.views:
        seen = "; ".join(f"{o}: {v.why_not or v.state or 'not schedulable'}" for o, v in sorted(entry.views.items()))
        where = f"no orchestrator may schedule on it ({seen})"
    else:
        where = "no orchestrator lists it"
    gpus = f"its {host.gpu_total} GPUs" if host and host.gpu_total else "its GPUs"
    return Condition(
        key=f"{FindingKind.ORPHAN}:{name}",
        kind=FindingKind.ORPHAN,
        severity=Severity.MEDIUM,
        node=name,
        orchestrators=tuple(sorted(entry.views)),
        explanation=(
            f"{name} is owned by nobody: {where}, so {gpus} are paid for and used by none. "
            f"{_expectation(host).capitalize()}; resume it there or retire it from the inventory."
        ),
        grace_s=config.orphan_after_s,
    )


def _source_conditions(view: SourceView, host: Host | None, name: str, config: LedgerConfig) -> list[Condition]:
    found = []
    reports_gpus = view.gpu_total > 0 or view.schedulable  # a cordoned node may report 0 allocatable: no word
    if host is not None and host.gpu_total and view.gpu_total != host.gpu_total and reports_gpus:
        found.append(_capacity(view, host))
    if view.gpu_backed is not None and view.gpu_allocated - view.gpu_backed >= config.phantom_min_gpus:
        found.append(_phantom(view, name, config))
    return found


def _capacity(view: SourceView, host: Host) -> Condition:
    fewer = view.gpu_total < host.gpu_total
    missing = sorted(host.gpu_uuids - view.gpu_uuids) if host.gpu_uuids and view.gpu_uuids else []
    detail = f" (missing {', '.join(missing)})" if missing else ""
    if fewer:
        text = (
            f"{view.orchestrator} reports {view.gpu_total} GPUs on {host.name}, the inventory {host.gpu_total}"
            f"{detail}: a GPU has failed, fallen off the bus or is hidden from the scheduler (check nvidia-smi, "
            f"the node's gres.conf or device plugin)."
        )
    else:
        text = (
            f"{view.orchestrator} reports {view.gpu_total} GPUs on {host.name}, more than the inventory's "
            f"{host.gpu_total}: the inventory is out of date (or the scheduler is configured with GPUs it lacks)."
        )
    return Condition(
        key=f"{FindingKind.CAPACITY_MISMATCH}:{host.name}:{view.orchestrator}",
        kind=FindingKind.CAPACITY_MISMATCH,
        severity=Severity.MEDIUM if fewer else Severity.LOW,
        node=host.name,
        orchestrators=(view.orchestrator,),
        explanation=text,
    )


def _phantom(view: SourceView, name: str, config: LedgerConfig) -> Condition:
    backed = view.gpu_backed or 0.0
    return Condition(
        key=f"{FindingKind.PHANTOM_ALLOCATION}:{name}:{view.orchestrator}",
        kind=FindingKind.PHANTOM_ALLOCATION,
        severity=Severity.MEDIUM,
        node=name,
        orchestrators=(view.orchestrator,),
        explanation=(
            f"{view.orchestrator} counts {view.gpu_allocated} GPUs allocated on {name} but its running workloads "
            f"hold {backed:g} there: {view.gpu_allocated - backed:g} GPUs are held by nothing it lists "
            f"(a leaked allocation, a zombie job step or a pod stuck terminating)."
        ),
        grace_s=config.phantom_after_s,
    )


def _unknown(view: SourceView, kind: str) -> Condition:
    return Condition(
        key=f"{FindingKind.UNKNOWN_NODE}:{view.orchestrator}:{view.name}",
        kind=FindingKind.UNKNOWN_NODE,
        severity=Severity.LOW,
        node=view.name,
        orchestrators=(view.orchestrator,),
        explanation=(
            f"{view.orchestrator} ({kind}) lists {view.name} with {view.gpu_total} GPUs, but no host of the fleet "
            f"inventory matches it by alias, host name or GPU UUID: add the host, or an alias if it is a known "
            f"host under another name."
        ),
    )


_WAITING = ("pending", "draining", "moved")


def _is_stuck(step: PlanStep, now: float) -> bool:
    return step.state in _WAITING and now - step.since > step.timeout_s


def _stuck(step: PlanStep, now: float) -> Condition:
    waited = (now - step.since) / 60
    what = {
        "pending": "has not started draining",
        "draining": "is still draining",
        "moved": "was handed over but its new owner never confirmed it",
    }[step.state]
    return Condition(
        key=f"{FindingKind.STUCK_TRANSITION}:{step.move_id}",
        kind=FindingKind.STUCK_TRANSITION,
        severity=Severity.HIGH,
        node=step.node,
        orchestrators=(step.source, step.target),
        explanation=(
            f"Plan #{step.plan_id} moving {step.node} from {step.source} to {step.target} {what} after "
            f"{waited:.0f} min (timeout {step.timeout_s / 60:.0f} min): its step chain may be lost or the node "
            f"may be stuck; check the plan and the node in both orchestrators."
        ),
    )


# ------------------------------------------------------------------------------------------ reconcile


def _is_held(finding: Finding, detection: Detection) -> bool:
    """May this round not decide whether the finding still holds?"""
    if finding.kind is FindingKind.STUCK_TRANSITION:
        return False  # the portal's own plan state: never stale
    if finding.kind in (FindingKind.DOUBLE_OWNERSHIP, FindingKind.ORPHAN):
        return (finding.kind, finding.node) in detection.held
    return bool(set(finding.orchestrators) & detection.stale_sources)  # one source's own word


def reconcile(previous: Sequence[Finding], detection: Detection, now: float) -> Reconciliation:
    """Open, update and close findings so that the record follows the conditions of this round."""
    current = {c.key: c for c in detection.conditions}
    upserts: list[Finding] = []
    newly_open: list[str] = []
    closed: list[str] = []
    discarded: list[str] = []
    held: list[str] = []
    known = {f.key: f for f in previous}
    for key, finding in known.items():
        condition = current.get(key)
        if condition is None:
            if _is_held(finding, detection):
                held.append(key)
            else:
                (closed if finding.opened_at is not None else discarded).append(key)
            continue
        updated = _advance(finding, condition, now)
        if updated.opened_at is not None and finding.opened_at is None:
            newly_open.append(key)
        upserts.append(updated)
    for key, condition in current.items():
        if key in known:
            continue
        fresh = _advance(
            Finding(key, condition.kind, condition.severity, condition.node, (), "", now, now), condition, now
        )
        if fresh.opened_at is not None:
            newly_open.append(key)
        upserts.append(fresh)
    return Reconciliation(tuple(upserts), tuple(newly_open), tuple(closed), tuple(discarded), tuple(held))


def _advance(finding: Finding, condition: Condition, now: float) -> Finding:
    opened = finding.opened_at
    if opened is None and now - finding.first_seen >= condition.grace_s:
        opened = now
    return replace(
        finding,
        severity=condition.severity,
        orchestrators=condition.orchestrators,
        explanation=condition.explanation,
        last_seen=now,
        opened_at=opened,
    )


# ------------------------------------------------------------------------------------------ ownership


def ownership_changes(
    open_intervals: Iterable[tuple[str, str]], detection: Detection
) -> tuple[frozenset[tuple[str, str]], frozenset[tuple[str, str]]]:
    """(host, orchestrator) intervals to open and to close. An interval of a stale source stays open:
    the ledger does not know it ended."""
    now_owned = {(o.host, owner) for o in detection.ownership for owner in o.owners}
    before = set(open_intervals)
    to_close = {pair for pair in before - now_owned if pair[1] not in detection.stale_sources}
    return frozenset(now_owned - before), frozenset(to_close)
