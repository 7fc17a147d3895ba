"""Governance as native objects: the portal's intent in, each orchestrator's desired objects out, and
the diff between those and what the orchestrator holds. Pure: no I/O, no clock (``at`` is passed in).

Each orchestrator is written a team's *share* of its fleet entitlement (``split``, from
:mod:`.entitlement_split`), never the whole figure copied to every one. The mapping (docs/governance.md says why):

- **Slurm**: one account per team under its parent team's account (top-level teams under
  ``slurm_root_account``); ``Fairshare`` = the team's weight in hundredths of a percent; the cap
  ``GrpTRES=gres/gpu=N`` on the account's association, N = its share of the cap there; each member
  becomes a user association in the account (portal username = cluster user unless overridden).
- **Kubernetes**: the team's namespaces (``gpuportal.io/team`` label; default: one named after the team),
  a ResourceQuota on ``requests.nvidia.com/gpu`` in each of them, summing to its share of the cap there, a
  Volcano Queue per team (weight = its share of the whole cluster in basis points, ``guarantee`` = its share
  of the guarantee less its sub-teams', ``capability`` = its share of the cap, reclaimable), and Kueue
  ClusterQueue/LocalQueues where Kueue is installed.
- **Ray**: no per-team quota exists; the pool's autoscaler bounds only ("Ray: pool-level only").

Without a split (``desired_state(..., split=None)``: one orchestrator on its own, the engine's tests), the
fleet figures are used as they are.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import TYPE_CHECKING

from .calendar import Bounds
from .governance_types import (
    GPU_TRES,
    KUEUE_RECLAIM_ANY,
    KUEUE_RECLAIM_NEVER,
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
    kueue_lender_name,
    settings,
)
from .types import OrchestratorKind

if TYPE_CHECKING:  # entitlement_split builds on this module's input types
    from .entitlement_split import Split, SplitShare

# Slurm compares siblings' shares only, so the scale is free: hundredths of a percent keep two decimals.
FAIRSHARE_PER_PERCENT = 100
# Volcano queues are flat and compared cluster-wide: a team's share of the whole cluster, in basis points.
VOLCANO_WEIGHT_SCALE = 10_000
RAY_POOL_ONLY = (
    "Ray: pool-level only (Ray has no per-team quota: team caps there are observed, not enforced; the pool "
    "ceiling is read back from what its jobs hold and kept by stopping borrowed jobs)"
)
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
    size, the Ray ceiling when no policy sets one. ``namespace_demand``: GPUs running and pending per namespace
    in the last collect round (Kubernetes), by which a team's share is divided among its namespaces' quotas."""

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
    kueue_reclaim: bool = False  # reclaim mode "native": Kueue's reclaimWithinCohort takes borrowed GPUs back
    pool_gpus: int = 0
    namespace_demand: Mapping[str, tuple[int, int]] = field(default_factory=dict)  # ns -> (running, pending) GPUs


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
    skipped: tuple[InputProblem, ...] = ()  # teams this orchestrator cannot name: left out here alone


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
    """What breaks the tree itself. A name one orchestrator cannot use is not here: ``team_name_problems``
    leaves that team out on that orchestrator alone."""
    problems: list[InputProblem] = []
    owner: dict[str, str] = {}
    for team in teams:
        if team.parent is not None and team.parent not in slugs:
            problems.append(InputProblem("team.parent", f"{team.slug}: parent {team.parent!r} is not a team"))
        for ns in namespaces_of(team):
            if owner.setdefault(ns, team.slug) != team.slug:
                problems.append(
                    InputProblem("team.namespaces", f"{ns!r} is mapped to both {owner[ns]} and {team.slug}")
                )
    return problems


SLURM_NAME_RULE = "letters, digits, '_', '.' and '-', not starting with '.' or '-', at most 64 characters"
DNS_LABEL_RULE = "a DNS-1123 label: lower-case letters, digits and '-', starting and ending alphanumeric, at most 63"


def team_name_problems(team: GovTeam, orch: GovOrchestrator) -> list[InputProblem]:
    """Why ``orch`` cannot name ``team``'s objects (empty: it can): a Slurm account is named by the slug; on
    Kubernetes the namespaces, and the Volcano queue or Kueue ClusterQueue named by the slug, are DNS-1123
    labels. Asked on save (services.governance) and each round (the team is then left out there alone)."""
    problems: list[InputProblem] = []
    if orch.kind is OrchestratorKind.SLURM:
        if not _SLURM_NAME.match(team.slug):
            problems.append(
                InputProblem("team.slug", f"{orch.name}: {team.slug!r} is not a Slurm account name ({SLURM_NAME_RULE})")
            )
        if team.slug in (orch.slurm_root_account, "root"):
            problems.append(
                InputProblem("team.slug", f"{orch.name}: a team may not be named {orch.slurm_root_account!r} or 'root'")
            )
    elif orch.kind is OrchestratorKind.KUBERNETES:
        if (orch.volcano or orch.kueue) and not _DNS_LABEL.match(team.slug):
            problems.append(
                InputProblem("team.slug", f"{orch.name}: {team.slug!r} names a queue and is not {DNS_LABEL_RULE}")
            )
        if orch.kueue and team.slug == kueue_lender_name(orch.kueue_cohort):
            problems.append(
                InputProblem("team.slug", f"{orch.name}: {team.slug!r} is the ClusterQueue of the GPUs guaranteed "
                                          f"to no team in cohort {orch.kueue_cohort}")
            )
        problems += [
            InputProblem("team.namespaces", f"{orch.name}: {team.slug}: namespace {ns!r} is not {DNS_LABEL_RULE}")
            for ns in namespaces_of(team)
            if not _DNS_LABEL.match(ns) and not (problems and ns == team.slug)  # said once for the slug
        ]
    return problems


def _skipped_teams(teams: Sequence[GovTeam], orch: GovOrchestrator) -> dict[str, list[InputProblem]]:
    """The teams ``orch`` cannot name, each with why, and their sub-teams: Slurm accounts nest under their
    parent's, and shares are multiplied down the tree."""
    skipped = {t.slug: found for t in teams if (found := team_name_problems(t, orch))}
    parent = {t.slug: t.parent for t in teams}
    for team in teams:
        above = [a for a in _chain(team.slug, parent) if a in skipped and a != team.slug]
        if above and team.slug not in skipped:
            skipped[team.slug] = [
                InputProblem("team.parent", f"{orch.name}: {team.slug} is under {above[0]!r}, left out above")
            ]
    return skipped


def _chain(slug: str, parent: Mapping[str, str | None]) -> list[str]:
    seen: list[str] = []
    current: str | None = slug
    while current is not None and current not in seen:
        seen.append(current)
        current = parent.get(current)
    return seen


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
    share: SplitShare | None = None  # the split share these figures come from (None: copied whole)


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


def split_entitlements_on(data: GovernanceInput, orch: GovOrchestrator, split: Split) -> dict[str, Entitlement]:
    """Per team: its sibling weight and its *share* of the fleet entitlement on ``orch`` (the split), instead
    of the whole fleet figures copied to every orchestrator."""
    queues_by_team: dict[str, list[GovQueue]] = {}
    for q in data.queues:
        queues_by_team.setdefault(q.team, []).append(q)
    result = {}
    for team in data.teams:
        queue = _queue_for(queues_by_team.get(team.slug, ()), orch.gpu_model)
        weight = queue.weight if queue is not None else 0.0
        share = split.share(team.slug, orch.name, orch.gpu_model)
        if share is None:
            result[team.slug] = Entitlement(team.slug, weight, 0, None, 0)
        else:
            result[team.slug] = Entitlement(team.slug, weight, share.guarantee, share.cap, 0, share)
    return result


def own_guarantees(teams: Sequence[GovTeam], ents: Mapping[str, Entitlement]) -> dict[str, int]:
    """Each team's guarantee less its children's: what a *flat* queue (Volcano, Kueue) must reserve for it, so
    the guarantees written on one cluster add up to the top-level teams' (which the split fits to its supply)."""
    kids: dict[str, int] = {}
    for team in teams:
        if team.parent is not None:
            kids[team.parent] = kids.get(team.parent, 0) + ents[team.slug].guaranteed
    return {t.slug: max(0, ents[t.slug].guaranteed - kids.get(t.slug, 0)) for t in teams}


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
    data: GovernanceInput, orchestrators: Sequence[GovOrchestrator], at: float, split: Split | None = None
) -> dict[str, DesiredState]:
    """Each orchestrator's desired native objects at ``at``. With ``split`` (what every enforcement round
    passes), each orchestrator gets the team's *share* of its fleet entitlement there; without it, the fleet
    figures as they are (one orchestrator alone: a what-if, the engine's own tests). Raises
    GovernanceInputError (every problem, each naming its field and rule) when the input cannot be enforced,
    before any object is produced. A team one orchestrator cannot name is left out there
    (``DesiredState.skipped`` says why); the rest goes ahead."""
    problems = validate(data, orchestrators)
    if problems:
        raise GovernanceInputError(problems)
    return {o.name: _desired_on(data, o, at, split) for o in orchestrators}


def _desired_on(data: GovernanceInput, orch: GovOrchestrator, at: float, split: Split | None) -> DesiredState:
    builders = {OrchestratorKind.SLURM: _slurm, OrchestratorKind.KUBERNETES: _kubernetes, OrchestratorKind.RAY: _ray}
    skipped = _skipped_teams(data.teams, orch)
    if skipped:
        data = GovernanceInput(
            tuple(t for t in data.teams if t.slug not in skipped),
            tuple(q for q in data.queues if q.team not in skipped),
            tuple(g for g in data.grants if g.team not in skipped),
            data.pool_bounds,
        )
    problems = [p for found in skipped.values() for p in found]
    if orch.kind is OrchestratorKind.SLURM:
        data, unnamed = _without_unnamed_users(data, orch)
        problems += unnamed
    state = builders[orch.kind](data, orch, at, split)
    return replace(state, skipped=tuple(problems))


def _without_unnamed_users(data: GovernanceInput, orch: GovOrchestrator) -> tuple[GovernanceInput, list[InputProblem]]:
    """Members whose cluster user name Slurm refuses are left out alone: ``eve,alice`` would reach ``sacctmgr
    add user`` as a list of two users."""
    bad = sorted({m for t in data.teams for m in t.members if not _SLURM_NAME.match(orch.user_overrides.get(m, m))})
    if not bad:
        return data, []
    teams = tuple(replace(t, members=tuple(m for m in t.members if m not in bad)) for t in data.teams)
    problems = [
        InputProblem("team.members", f"{orch.name}: user {m!r} is not a Slurm user name ({SLURM_NAME_RULE})")
        for m in bad
    ]
    return replace(data, teams=teams), problems


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
    if ent.share is not None:
        return ent.share.reasons[1]
    return f"cap {ent.cap} GPUs = burst limit {ent.cap - ent.granted} + {ent.granted} granted"


def _guarantee_text(ent: Entitlement) -> str:
    if ent.share is not None:
        return ent.share.reasons[0]
    return f"guarantee {ent.guaranteed} = guaranteed + {ent.granted} granted"


def _entitlements_of(
    data: GovernanceInput, orch: GovOrchestrator, at: float, split: Split | None, *, subtree_grants: bool = False
) -> dict[str, Entitlement]:
    if split is not None:
        return split_entitlements_on(data, orch, split)
    return entitlements(data, orch, at, subtree_grants=subtree_grants)


def _slurm(data: GovernanceInput, orch: GovOrchestrator, at: float, split: Split | None) -> DesiredState:
    ents, out = _entitlements_of(data, orch, at, split, subtree_grants=True), _Collector()
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


def _kubernetes(data: GovernanceInput, orch: GovOrchestrator, at: float, split: Split | None) -> DesiredState:
    ents, out = _entitlements_of(data, orch, at, split), _Collector()
    shares = cluster_shares(data.teams, ents)
    own = own_guarantees(data.teams, ents) if split is not None else {t: e.guaranteed for t, e in ents.items()}
    for name, (value, description) in PRIORITY_CLASSES.items():
        out.add(K8sPriorityClass(name, value, description), f"priority {value}: set by the admission webhook")
    for team in data.teams:
        ent = ents[team.slug]
        namespaces = namespaces_of(team)
        quotas = _namespace_quotas(ent, namespaces, orch.namespace_demand, divide=split is not None)
        for ns in namespaces:
            out.add(K8sNamespace(ns, team.slug), f"namespace of team {team.slug}")
            if ent.cap is not None:
                out.add(
                    K8sResourceQuota(ns, QUOTA_NAME, quotas[ns]),
                    f"requests.nvidia.com/gpu: {_quota_text(ent, quotas, ns)}",
                )
        if orch.volcano:
            _volcano_queue(out, ent, shares[team.slug], own[team.slug])
        if orch.kueue:
            _kueue_queues(out, orch, team, ent, own[team.slug])
    if orch.kueue:
        _kueue_lender(out, orch, sum(own[team.slug] for team in data.teams))
    return out.state(orch.name)


def _namespace_quotas(
    ent: Entitlement, namespaces: Sequence[str], demand: Mapping[str, tuple[int, int]], *, divide: bool
) -> dict[str, int]:
    """The team's cap on this cluster divided among its namespaces so the quotas sum to it (a ResourceQuota
    cannot span namespaces): what runs in each first, then what is pending, then the rest evenly. Without a
    split (the fleet figures copied) each namespace gets the whole cap, as before."""
    if ent.cap is None or not divide or len(namespaces) == 1:
        return {ns: ent.cap or 0 for ns in namespaces}
    from .entitlement_split import divide_among  # here: entitlement_split imports this module

    running = [demand.get(ns, (0, 0))[0] for ns in namespaces]
    pending = [demand.get(ns, (0, 0))[1] for ns in namespaces]
    return dict(zip(namespaces, divide_among(ent.cap, running, pending), strict=True))


def _quota_text(ent: Entitlement, quotas: Mapping[str, int], ns: str) -> str:
    if len(quotas) == 1 or ent.share is None:
        return _cap_text(ent)
    n = len(quotas)
    return f"{quotas[ns]} of the team's cap {ent.cap} on this cluster, divided among {n} namespaces by their work"


def _volcano_queue(out: _Collector, ent: Entitlement, share: float, own: int) -> None:
    weight = max(1, round(share * VOLCANO_WEIGHT_SCALE))
    kept = f" (its sub-teams' queues hold {ent.guaranteed - own} of {ent.guaranteed})" if own != ent.guaranteed else ""
    out.add(
        VolcanoQueue(ent.team, weight, own, ent.cap, reclaimable=True),
        f"weight {weight}: {share:.2%} of the cluster (sibling weights multiplied down the tree)",
        f"guarantee {own}{kept}: {_guarantee_text(ent)}; capability: {_cap_text(ent)}",
    )


def _kueue_queues(out: _Collector, orch: GovOrchestrator, team: GovTeam, ent: Entitlement, own: int) -> None:
    borrow = None if ent.cap is None else max(0, ent.cap - own)
    flavor = orch.gpu_model or orch.kueue_flavor
    reclaim = KUEUE_RECLAIM_ANY if orch.kueue_reclaim else KUEUE_RECLAIM_NEVER
    out.add(
        KueueClusterQueue(team.slug, orch.kueue_cohort, flavor, own, borrow, None, reclaim),
        f"nominal {own} ({_guarantee_text(ent)}), may borrow {borrow} in cohort {orch.kueue_cohort}",
        f"reclaimWithinCohort {reclaim}: "
        + ("reclaim mode native, Kueue evicts borrowers when this queue's guaranteed work waits" if orch.kueue_reclaim
           else "Kueue takes nothing back (reclaim mode is not native)"),
    )
    for ns in namespaces_of(team):
        out.add(KueueLocalQueue(ns, team.slug, team.slug), f"submits from {ns} to ClusterQueue {team.slug}")


def _kueue_lender(out: _Collector, orch: GovOrchestrator, guaranteed: int) -> None:
    """The pool's GPUs guaranteed to no team, in a queue of the cohort that nothing submits to and that never
    borrows: Kueue lends only quota some queue of the cohort holds, so without it no team could borrow them."""
    unguaranteed = max(0, orch.pool_gpus - guaranteed)
    name = kueue_lender_name(orch.kueue_cohort)
    out.add(
        KueueClusterQueue(name, orch.kueue_cohort, orch.gpu_model or orch.kueue_flavor, unguaranteed, 0, None),
        f"nominal {unguaranteed}: the pool's {orch.pool_gpus} GPUs less the {guaranteed} guaranteed to teams"
        + (" (more guaranteed than the pool holds)" if orch.pool_gpus < guaranteed else ""),
        f"lends them to the teams of cohort {orch.kueue_cohort}; no LocalQueue submits to it",
    )


def _ray(data: GovernanceInput, orch: GovOrchestrator, at: float, split: Split | None) -> DesiredState:
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
