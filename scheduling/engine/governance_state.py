"""Governance as native objects: the portal's intent in, each orchestrator's desired objects out, and
the diff between those and what the orchestrator holds. Pure: no I/O, no clock (``at`` is passed in).

The mapping (docs/governance.md says why):

- **Slurm**: one account per team under its parent team's account (top-level teams under
  ``slurm_root_account``); ``Fairshare`` = the team's weight in hundredths of a percent; the cap
  ``GrpTRES=gres/gpu=N`` on the account's association, N = burst limit + active grants; each member
  becomes a user association in the account (portal username = cluster user unless overridden).
- **Kubernetes**: the team's namespaces (``gpuportal.io/team`` label; default: one named after the team),
  a ResourceQuota on ``requests.nvidia.com/gpu`` = the cap in each of them, a Volcano Queue per team
  (weight = its share of the whole cluster in basis points, ``guarantee`` = guaranteed + grants,
  ``capability`` = the cap, reclaimable), and Kueue ClusterQueue/LocalQueues where Kueue is installed.
- **Ray**: no per-team quota exists; the pool's autoscaler bounds only ("Ray: pool-level only").
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from .calendar import Bounds
from .governance_types import (
    GPU_TRES,
    PRIORITY_CLASSES,
    K8sNamespace,
    K8sPriorityClass,
    K8sResourceQuota,
    KueueClusterQueue,
    KueueLocalQueue,
    NativeObject,
    RayPoolBounds,
    SlurmAccount,
    SlurmUser,
    VolcanoQueue,
    settings,
)
from .types import OrchestratorKind

# Slurm compares siblings' shares only, so the scale is free: hundredths of a percent keep two decimals.
FAIRSHARE_PER_PERCENT = 100
# Volcano queues are flat and compared cluster-wide: a team's share of the whole cluster, in basis points.
VOLCANO_WEIGHT_SCALE = 10_000
RAY_POOL_ONLY = "Ray: pool-level only (Ray has no per-team quota; the pool's autoscaler bounds are enforced)"
QUOTA_NAME = "gpuportal-gpu"
# RFC 1123 labels (namespace names) and what sacctmgr accepts as an account or user name.
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
_SLURM_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}$")


# ------------------------------------------------------------------------------------------- input


@dataclass(frozen=True, slots=True)
class GovTeam:
    """A team of the portal's tree. ``namespaces`` is its Kubernetes mapping (empty: one named ``slug``)."""

    slug: str
    parent: str | None = None
    members: tuple[str, ...] = ()
    namespaces: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class GovQueue:
    """A team's entitlement for one GPU model ("" = any model): weight is a percentage among siblings."""

    team: str
    weight: float
    guaranteed: int
    burst_limit: int
    gpu_model: str = ""


@dataclass(frozen=True, slots=True)
class GovGrant:
    """An approved quota grant: ``gpus`` more for ``team`` in ``[starts_at, ends_at)`` (epoch seconds),
    on one orchestrator or ("" ) all of them, for one GPU model or ("") any."""

    team: str
    gpus: int
    starts_at: float
    ends_at: float
    gpu_model: str = ""
    orchestrator: str = ""
    revoked: bool = False

    def active_at(self, at: float) -> bool:
        return not self.revoked and self.starts_at <= at < self.ends_at


@dataclass(frozen=True, slots=True)
class GovOrchestrator:
    """One orchestrator and how governance maps onto it.

    ``gpu_model``: the model of its pool ("" = any; a team's queue for that model wins over its any-model
    queue). ``user_overrides``: portal username -> cluster user where they differ. ``pool_gpus``: the pool's
    size, the Ray ceiling when no policy sets one."""

    name: str
    kind: OrchestratorKind
    gpu_model: str = ""
    slurm_root_account: str = "root"
    slurm_typed_gres: bool = False
    user_overrides: Mapping[str, str] = field(default_factory=dict)
    volcano: bool = True
    kueue: bool = False
    kueue_cohort: str = "gpuportal"
    kueue_flavor: str = "default-flavor"
    pool_gpus: int = 0


@dataclass(frozen=True, slots=True)
class GovernanceInput:
    teams: tuple[GovTeam, ...]
    queues: tuple[GovQueue, ...]
    grants: tuple[GovGrant, ...] = ()
    pool_bounds: Mapping[str, Bounds] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class InputProblem:
    """Why the input cannot be enforced: the field it concerns and the rule it breaks."""

    field: str
    message: str


class GovernanceInputError(ValueError):
    def __init__(self, problems: Sequence[InputProblem]) -> None:
        super().__init__("; ".join(f"{p.field}: {p.message}" for p in problems))
        self.problems = tuple(problems)


# ------------------------------------------------------------------------------------------ output


@dataclass(frozen=True, slots=True)
class DesiredState:
    """One orchestrator's desired objects, each with the reasons that produced it (by ``kind:key``)."""

    orchestrator: str
    objects: tuple[NativeObject, ...]
    reasons: Mapping[str, tuple[str, ...]]
    notes: tuple[str, ...] = ()


def object_id(obj: NativeObject) -> str:
    return f"{obj.kind}:{obj.key}"


# ------------------------------------------------------------------------------------- validation


def validate(data: GovernanceInput, orchestrators: Sequence[GovOrchestrator]) -> tuple[InputProblem, ...]:
    """Every reason the input cannot be turned into native objects, before anything is written."""
    slugs = {t.slug for t in data.teams}
    problems = [*_team_problems(data.teams, slugs), *_queue_problems(data.queues, slugs)]
    problems += [
        InputProblem("grant.team", f"grant names unknown team {g.team!r}") for g in data.grants if g.team not in slugs
    ]
    for orch in orchestrators:
        problems += _orchestrator_problems(orch, data.teams)
    return tuple(problems)


def _team_problems(teams: Sequence[GovTeam], slugs: set[str]) -> list[InputProblem]:
    problems: list[InputProblem] = []
    owner: dict[str, str] = {}
    for team in teams:
        if team.parent is not None and team.parent not in slugs:
            problems.append(InputProblem("team.parent", f"{team.slug}: parent {team.parent!r} is not a team"))
        if not _SLURM_NAME.match(team.slug):
            problems.append(InputProblem("team.slug", f"{team.slug!r} is not a valid Slurm account name"))
        for ns in namespaces_of(team):
            if not _DNS_LABEL.match(ns):
                problems.append(InputProblem("team.namespaces", f"{team.slug}: {ns!r} is not a DNS-1123 label"))
            elif owner.setdefault(ns, team.slug) != team.slug:
                problems.append(
                    InputProblem("team.namespaces", f"{ns!r} is mapped to both {owner[ns]} and {team.slug}")
                )
    return problems


def _queue_problems(queues: Sequence[GovQueue], slugs: set[str]) -> list[InputProblem]:
    problems = []
    for q in queues:
        if q.team not in slugs:
            problems.append(InputProblem("queue.team", f"queue names unknown team {q.team!r}"))
        if not 0 <= q.weight <= 100:
            problems.append(InputProblem("queue.weight", f"{q.team}: weight {q.weight} is not within 0-100"))
        if not 0 <= q.guaranteed <= q.burst_limit:
            problems.append(InputProblem("queue.guaranteed", f"{q.team}: 0 <= guaranteed <= burst limit does not hold"))
    return problems


def _orchestrator_problems(orch: GovOrchestrator, teams: Sequence[GovTeam]) -> list[InputProblem]:
    # An override for someone in no team is merely unused (they may rejoin); a name Slurm refuses is not.
    problems = [
        InputProblem("user_overrides", f"{orch.name}: {user!r} -> {cluster_user!r} is not a valid cluster user name")
        for user, cluster_user in orch.user_overrides.items()
        if not _SLURM_NAME.match(cluster_user)
    ]
    root = orch.slurm_root_account
    if orch.kind is OrchestratorKind.SLURM and not _SLURM_NAME.match(root):
        problems.append(InputProblem("slurm_root_account", f"{root!r} is not a Slurm account name"))
    if orch.kind is OrchestratorKind.SLURM and any(t.slug in (root, "root") for t in teams):
        problems.append(InputProblem("team.slug", f"{orch.name}: a team may not be named {root!r} or 'root'"))
    return problems


# ----------------------------------------------------------------------------------- entitlements


@dataclass(frozen=True, slots=True)
class Entitlement:
    """A team's entitlement on one orchestrator: its sibling weight, guarantee and cap (grants added)."""

    team: str
    weight: float
    guaranteed: int
    cap: int | None  # None: the team has no queue for this orchestrator's model, so no cap of its own
    granted: int


def namespaces_of(team: GovTeam) -> tuple[str, ...]:
    return team.namespaces or (team.slug,)


def _queue_for(queues: Iterable[GovQueue], model: str) -> GovQueue | None:
    """The team's queue for ``model``, else its any-model queue (a model-specific entitlement wins)."""
    by_model = {q.gpu_model: q for q in queues}
    return by_model.get(model) or by_model.get("")


def _granted(data: GovernanceInput, orch: GovOrchestrator, at: float) -> dict[str, int]:
    """GPUs granted per team on ``orch`` at ``at`` (active, for this orchestrator or all, this model or any)."""
    granted: dict[str, int] = {}
    for g in data.grants:
        if g.active_at(at) and g.orchestrator in ("", orch.name) and g.gpu_model in ("", orch.gpu_model):
            granted[g.team] = granted.get(g.team, 0) + g.gpus
    return granted


def _with_descendants(teams: Sequence[GovTeam], own: Mapping[str, int]) -> dict[str, int]:
    """Each team's own grants plus its descendants': a Slurm parent's GrpTRES caps its whole subtree,
    so a grant to a child must raise every ancestor's cap too or it would never take effect."""
    parent = {t.slug: t.parent for t in teams}
    total = {t.slug: 0 for t in teams}
    for team, gpus in own.items():
        node: str | None = team
        while node is not None:
            total[node] += gpus
            node = parent[node]
    return total


@dataclass(frozen=True, slots=True)
class FleetEntitlement:
    """A team's fleet-wide entitlement at a moment: the one answer to "may this team run GPU work, and how
    much" that the admission webhook, the quota page, the workloads' wait explanations and governance share.

    ``guaranteed`` and ``cap`` are its queues' (the any-model queue, else the sum of its GPU-model queues) plus
    its active grants; ``cap`` is None when the team has neither (its parent's cap applies). ``holds_gpus``: its
    own queue or grant holds GPUs, or, with neither, its nearest ancestor's does."""

    team: str
    guaranteed: int
    cap: int | None
    granted: int
    holds_gpus: bool


def fleet_entitlements(data: GovernanceInput, at: float) -> dict[str, FleetEntitlement]:
    """Every team's ``FleetEntitlement`` at ``at`` (grants active then, for any orchestrator and model)."""
    queues_by_team: dict[str, list[GovQueue]] = {}
    for q in data.queues:
        queues_by_team.setdefault(q.team, []).append(q)
    granted: dict[str, int] = {}
    for g in data.grants:
        if g.active_at(at):
            granted[g.team] = granted.get(g.team, 0) + g.gpus
    own: dict[str, tuple[int, int | None]] = {}
    for team in data.teams:
        queues, extra = queues_by_team.get(team.slug, []), granted.get(team.slug, 0)
        chosen = [q for q in queues if q.gpu_model == ""] or queues
        if not chosen and not extra:
            own[team.slug] = (0, None)
        else:
            own[team.slug] = (sum(q.guaranteed for q in chosen) + extra, sum(q.burst_limit for q in chosen) + extra)
    parent = {t.slug: t.parent for t in data.teams}
    result = {}
    for team in data.teams:
        guaranteed, cap = own[team.slug]
        result[team.slug] = FleetEntitlement(team.slug, guaranteed, cap, granted.get(team.slug, 0),
                                             _holds(team.slug, own, parent))
    return result


def _holds(slug: str, own: Mapping[str, tuple[int, int | None]], parent: Mapping[str, str | None]) -> bool:
    node: str | None = slug
    seen: set[str] = set()
    while node is not None and node not in seen and node in own:
        seen.add(node)
        guaranteed, cap = own[node]
        if cap is not None:
            return cap > 0 or guaranteed > 0
        node = parent.get(node)
    return False


def entitlements(
    data: GovernanceInput, orch: GovOrchestrator, at: float, *, subtree_grants: bool = False
) -> dict[str, Entitlement]:
    """Per team: weight, guarantee and cap on ``orch`` at ``at``. Grants add to both guarantee and cap
    (an approved grant is promised capacity). A team without a queue for the orchestrator's model has no
    cap of its own (its parent's applies) and gains only guarantee from grants."""
    queues_by_team: dict[str, list[GovQueue]] = {}
    for q in data.queues:
        queues_by_team.setdefault(q.team, []).append(q)
    own = _granted(data, orch, at)
    capped = _with_descendants(data.teams, own) if subtree_grants else own
    result = {}
    for team in data.teams:
        queue = _queue_for(queues_by_team.get(team.slug, ()), orch.gpu_model)
        extra, cap_extra = own.get(team.slug, 0), capped.get(team.slug, 0)
        if queue is None:
            result[team.slug] = Entitlement(team.slug, 0.0, extra, None, extra)
        else:
            cap = queue.burst_limit + cap_extra
            result[team.slug] = Entitlement(team.slug, queue.weight, queue.guaranteed + extra, cap, cap_extra)
    return result


def cluster_shares(teams: Sequence[GovTeam], ents: Mapping[str, Entitlement]) -> dict[str, float]:
    """Each team's own share of the whole cluster (0..1): the product of sibling fractions down its path,
    less what its children take (a parent's queue keeps only the remainder)."""
    children: dict[str | None, list[GovTeam]] = {}
    for team in teams:
        children.setdefault(team.parent, []).append(team)
    shares: dict[str, float] = {}

    def walk(parent: str | None, budget: float) -> None:
        siblings = children.get(parent, [])
        total = sum(ents[t.slug].weight for t in siblings) or 1.0
        for team in siblings:
            mine = budget * ents[team.slug].weight / total
            kids = children.get(team.slug, [])
            kid_weight = sum(ents[k.slug].weight for k in kids)
            shares[team.slug] = mine * max(0.0, 1 - kid_weight / 100) if kids else mine
            walk(team.slug, mine * min(1.0, kid_weight / 100) if kids else 0.0)

    walk(None, 1.0)
    return shares


# ---------------------------------------------------------------------------------- desired state


def desired_state(
    data: GovernanceInput, orchestrators: Sequence[GovOrchestrator], at: float
) -> dict[str, DesiredState]:
    """Each orchestrator's desired native objects at ``at``. Raises GovernanceInputError (every problem,
    each naming its field and rule) when the input cannot be enforced, before any object is produced."""
    problems = validate(data, orchestrators)
    if problems:
        raise GovernanceInputError(problems)
    builders = {OrchestratorKind.SLURM: _slurm, OrchestratorKind.KUBERNETES: _kubernetes, OrchestratorKind.RAY: _ray}
    return {o.name: builders[o.kind](data, o, at) for o in orchestrators}


class _Collector:
    """Objects and their reasons, in the order they are added."""

    def __init__(self) -> None:
        self.objects: list[NativeObject] = []
        self.reasons: dict[str, tuple[str, ...]] = {}

    def add(self, obj: NativeObject, *reasons: str) -> None:
        self.objects.append(obj)
        self.reasons[object_id(obj)] = reasons

    def state(self, orchestrator: str, *notes: str) -> DesiredState:
        return DesiredState(orchestrator, tuple(self.objects), self.reasons, notes)


def _cap_text(ent: Entitlement) -> str:
    if ent.cap is None:
        return "no queue for this model: no cap of its own (the parent's applies)"
    return f"cap {ent.cap} GPUs = burst limit {ent.cap - ent.granted} + {ent.granted} granted"


def _slurm(data: GovernanceInput, orch: GovOrchestrator, at: float) -> DesiredState:
    ents, out = entitlements(data, orch, at, subtree_grants=True), _Collector()
    root = orch.slurm_root_account
    if root != "root":
        out.add(SlurmAccount(root, "root", 1), f"the portal's teams hang under account {root}")
    tres = f"{GPU_TRES}:{orch.gpu_model}" if orch.slurm_typed_gres and orch.gpu_model else GPU_TRES
    for team in data.teams:
        ent = ents[team.slug]
        fairshare = round(ent.weight * FAIRSHARE_PER_PERCENT)
        grp = ((tres, ent.cap),) if ent.cap is not None else ()
        out.add(
            SlurmAccount(team.slug, team.parent or root, fairshare, grp),
            f"Fairshare {fairshare}: weight {ent.weight:g} % among its siblings",
            f"GrpTRES {tres}={ent.cap}: {_cap_text(ent)}" if grp else _cap_text(ent),
        )
        for member in team.members:
            user = orch.user_overrides.get(member, member)
            why = f"member {member}" + (f" is cluster user {user}" if user != member else "")
            out.add(SlurmUser(user, team.slug), why)
    return out.state(orch.name)


def _kubernetes(data: GovernanceInput, orch: GovOrchestrator, at: float) -> DesiredState:
    ents, out = entitlements(data, orch, at), _Collector()
    shares = cluster_shares(data.teams, ents)
    for name, (value, description) in PRIORITY_CLASSES.items():
        out.add(K8sPriorityClass(name, value, description), f"priority {value}: set by the admission webhook")
    for team in data.teams:
        ent = ents[team.slug]
        for ns in namespaces_of(team):
            out.add(K8sNamespace(ns, team.slug), f"namespace of team {team.slug}")
            if ent.cap is not None:
                out.add(K8sResourceQuota(ns, QUOTA_NAME, ent.cap), f"requests.nvidia.com/gpu: {_cap_text(ent)}")
        if orch.volcano:
            _volcano_queue(out, ent, shares[team.slug])
        if orch.kueue:
            _kueue_queues(out, orch, team, ent)
    return out.state(orch.name)


def _volcano_queue(out: _Collector, ent: Entitlement, share: float) -> None:
    weight = max(1, round(share * VOLCANO_WEIGHT_SCALE))
    out.add(
        VolcanoQueue(ent.team, weight, ent.guaranteed, ent.cap, reclaimable=True),
        f"weight {weight}: {share:.2%} of the cluster (sibling weights multiplied down the tree)",
        f"guarantee {ent.guaranteed} = guaranteed + {ent.granted} granted; capability: {_cap_text(ent)}",
    )


def _kueue_queues(out: _Collector, orch: GovOrchestrator, team: GovTeam, ent: Entitlement) -> None:
    borrow = None if ent.cap is None else max(0, ent.cap - ent.guaranteed)
    flavor = orch.gpu_model or orch.kueue_flavor
    out.add(
        KueueClusterQueue(team.slug, orch.kueue_cohort, flavor, ent.guaranteed, borrow, None),
        f"nominal {ent.guaranteed} (guaranteed + granted), may borrow {borrow} in cohort {orch.kueue_cohort}",
    )
    for ns in namespaces_of(team):
        out.add(KueueLocalQueue(ns, team.slug, team.slug), f"submits from {ns} to ClusterQueue {team.slug}")


def _ray(data: GovernanceInput, orch: GovOrchestrator, at: float) -> DesiredState:
    out = _Collector()
    bounds = data.pool_bounds.get(orch.name, Bounds(orch.name))
    ceiling = bounds.ceiling_gpus if bounds.ceiling_gpus is not None else orch.pool_gpus
    rule = f"pool policy {bounds.rule}" if bounds.rule else "no pool policy in force"
    out.add(RayPoolBounds(orch.name, bounds.floor_gpus, ceiling), f"{rule}: {bounds.floor_gpus}-{ceiling} GPUs")
    return out.state(orch.name, RAY_POOL_ONLY)


# -------------------------------------------------------------------------------------------- diff


class Action(StrEnum):
    CREATE = "create"
    UPDATE = "update"
    DELETE = "delete"
    UNCHANGED = "unchanged"


@dataclass(frozen=True, slots=True)
class FieldChange:
    field: str
    before: object
    after: object


@dataclass(frozen=True, slots=True)
class Change:
    """What to do to one object; ``fields`` say what differs between observed (before) and desired."""

    id: str
    action: Action
    desired: NativeObject | None
    observed: NativeObject | None
    fields: tuple[FieldChange, ...] = ()


@dataclass(frozen=True, slots=True)
class Drift:
    """An object changed on the cluster since the portal last applied it (a hand edit, or deleted by
    hand when ``observed`` is None): ``fields`` go from what was applied (before) to what is there."""

    id: str
    applied: NativeObject
    observed: NativeObject | None
    fields: tuple[FieldChange, ...]


@dataclass(frozen=True, slots=True)
class GovernanceDiff:
    orchestrator: str
    changes: tuple[Change, ...]
    drifts: tuple[Drift, ...]
    unmanaged: tuple[str, ...]  # observed, never applied by the portal, not desired: left alone

    def by_action(self, action: Action) -> tuple[Change, ...]:
        return tuple(c for c in self.changes if c.action is action)


def field_changes(before: NativeObject | None, after: NativeObject | None) -> tuple[FieldChange, ...]:
    old = settings(before) if before is not None else {}
    new = settings(after) if after is not None else {}
    return tuple(
        FieldChange(k, old.get(k), new.get(k)) for k in sorted(old.keys() | new.keys()) if old.get(k) != new.get(k)
    )


def diff(
    desired: DesiredState, observed: Iterable[NativeObject], last_applied: Iterable[NativeObject] = ()
) -> GovernanceDiff:
    """Desired vs observed -> create/update/delete/unchanged, and drift (observed vs last applied).

    Only objects the portal applied before are ever deleted: an observed object that is neither desired
    nor ever applied (an account or queue made by hand) is reported as unmanaged and left alone."""
    want = {object_id(o): o for o in desired.objects}
    have = {object_id(o): o for o in observed}
    applied = {object_id(o): o for o in last_applied}
    changes = [_change(i, want[i], have.get(i)) for i in want]
    changes += [
        Change(i, Action.DELETE, None, have[i], field_changes(have[i], None))
        for i in have
        if i not in want and i in applied
    ]
    drifts = [
        Drift(i, applied[i], have.get(i), field_changes(applied[i], have.get(i)))
        for i in applied
        if have.get(i) != applied[i]
    ]
    unmanaged = tuple(sorted(i for i in have if i not in want and i not in applied))
    return GovernanceDiff(desired.orchestrator, tuple(changes), tuple(drifts), unmanaged)


def _change(i: str, want: NativeObject, have: NativeObject | None) -> Change:
    if have is None:
        return Change(i, Action.CREATE, want, None, field_changes(None, want))
    fields = field_changes(have, want)
    return Change(i, Action.UPDATE if fields else Action.UNCHANGED, want, have, fields)
