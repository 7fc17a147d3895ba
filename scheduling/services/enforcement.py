"""Governance enforced on the clusters: each round builds the portal's intent from the ORM, reads
each orchestrator's native objects back through the collectors, diffs them, and applies the changes (*auto*)
or stores them as a plan an admin approves (*review*, the default). docs/governance.md says why.

- Every write is audited: ``AppliedObject`` rows (the ``last_applied`` of the next diff) carry the portal change
  that caused them (a queue edit, a grant, a drift reverted) and its author, in their history.
- A hand edit on a cluster (drift) becomes a ``DriftFinding``; while it is open the portal does not overwrite
  the object. Reverted, the next round writes the portal's intent back; adopted, the cluster's value stays until
  the portal's intent for that object changes.
- One orchestrator failing (unreachable, a refused write) keeps its changes pending, retried next round; the
  others proceed. The cluster I/O happens first, then one transaction per orchestrator records what happened,
  so nothing is half-recorded.
- Ray has no per-team quota: team caps there are observed, not enforced. The pool ceiling is read back from
  what its jobs really hold (services/reclaim.py ``RayPool``) and held by stopping borrowed jobs.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import partial
from typing import Any, Protocol

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import DatabaseError, transaction
from django.db.models import Max
from django.utils import timezone
from urllib3.exceptions import HTTPError as TransportError

from scheduling.collectors import CollectorError
from scheduling.collectors.governance_apply import ApplyResult, apply_kubernetes, apply_slurm
from scheduling.collectors.k8s_governance import KubernetesGovernance
from scheduling.collectors.slurm_accounting import SlurmAccountingWriter
from scheduling.engine.entitlement_split import Split
from scheduling.engine.governance_state import (
    Action,
    Change,
    DesiredState,
    GovernanceDiff,
    GovernanceInput,
    GovernanceInputError,
    GovOrchestrator,
    GovTeam,
    InputProblem,
    desired_state,
    diff,
    object_id,
)
from scheduling.engine.governance_types import (
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
)
from scheduling.engine.owners import NameKind
from scheduling.engine.types import OrchestratorKind
from scheduling.models import (
    AppliedObject,
    DriftFinding,
    EnforcementOutcome,
    EnforcementPlan,
    EnforcementRun,
    Membership,
    Orchestrator,
    Queue,
    QuotaGrant,
    Team,
)
from scheduling.selectors import entitlements as entitlement_reads
from scheduling.selectors.pool_policies import bounds_now

# The one import of the module that reads orchestrators' options and secrets (renamed services/orchestrators.py).
from . import entitlement_split, governance_trigger, identity, notifications, versions
from . import orchestrators as orchestrator_access
from .audit import require_reason, stamp_author
from .capacity import lock_capacity
from .reclaim import RayPool, reclaim_settings

AUTO, REVIEW = "auto", "review"
# What a cluster's reader or writer may raise when it is down: a collector's error, the OS's, the transport's.
UNREACHABLE = (CollectorError, OSError, TransportError)
ROUND_CAUSE = "governance round"
NATIVE_TYPES: dict[str, type] = {
    t.kind.value: t
    for t in (
        SlurmAccount,
        SlurmUser,
        K8sNamespace,
        K8sResourceQuota,
        VolcanoQueue,
        KueueClusterQueue,
        KueueLocalQueue,
        K8sPriorityClass,
        RayPoolBounds,
    )
}


# ------------------------------------------------------------------------------ native objects <-> JSON


def to_json(obj: NativeObject | None) -> dict[str, Any] | None:
    """Every field of ``obj`` (identity included) and its kind, as JSON (tuples become lists)."""
    if obj is None:
        return None
    data = {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}
    if "grp_tres" in data:
        data["grp_tres"] = [list(pair) for pair in data["grp_tres"]]
    return {"kind": obj.kind.value, **data}


def from_json(data: dict[str, Any]) -> NativeObject:
    values = {k: v for k, v in data.items() if k != "kind"}
    if "grp_tres" in values:
        values["grp_tres"] = tuple((str(name), int(count)) for name, count in values["grp_tres"])
    return NATIVE_TYPES[data["kind"]](**values)


def team_of(obj: NativeObject | None, namespace_teams: dict[str, str]) -> str:
    """The team slug an object enforces ("" for a pool-wide one such as Ray's bounds or the root account)."""
    if isinstance(obj, KueueClusterQueue) and obj.name == kueue_lender_name(obj.cohort):
        return ""  # the pool's unguaranteed GPUs: no team's
    if isinstance(obj, SlurmAccount | VolcanoQueue | KueueClusterQueue):
        return obj.name
    if isinstance(obj, SlurmUser):
        return obj.account
    if isinstance(obj, K8sNamespace):
        return obj.team
    if isinstance(obj, K8sResourceQuota):
        return namespace_teams.get(obj.namespace, "")
    if isinstance(obj, KueueLocalQueue):
        return obj.cluster_queue
    return ""


def _change_json(change: Change, reasons: dict[str, tuple[str, ...]], teams: dict[str, str]) -> dict[str, Any]:
    return {
        "id": change.id,
        "action": change.action.value,
        "team": team_of(change.desired or change.observed, teams),
        "desired": to_json(change.desired),
        "observed": to_json(change.observed),
        "fields": [{"field": f.field, "before": _plain(f.before), "after": _plain(f.after)} for f in change.fields],
        "reasons": list(reasons.get(change.id, ())),
    }


def _plain(value: object) -> object:
    return [list(v) if isinstance(v, tuple) else v for v in value] if isinstance(value, tuple) else value


# ----------------------------------------------------------------------------------- input from the ORM


def _epoch(moment: datetime) -> float:
    return moment.timestamp()


def governance_input(at: datetime) -> GovernanceInput:
    """The portal's intent at ``at``: the team tree with members, queues, grants not yet over, pool bounds."""
    members: dict[int, list[str]] = {}
    for team_id, username in Membership.objects.values_list("team_id", "user__username").order_by("user__username"):
        members.setdefault(team_id, []).append(username)
    slugs = dict(Team.objects.values_list("pk", "slug"))
    teams = tuple(
        GovTeam(slug, slugs.get(parent_id) if parent_id else None, tuple(members.get(pk, ())))
        for pk, slug, parent_id in Team.objects.values_list("pk", "slug", "parent_id").order_by("slug")
    )
    # The same queues and grants every other reader of entitlements sees (selectors/entitlements.py).
    return GovernanceInput(teams, entitlement_reads.queues(slugs), entitlement_reads.grants(slugs, at), bounds_now(at))


def governed_orchestrators() -> list[Orchestrator]:
    """The real (not demo), enabled Slurm, Kubernetes and Ray orchestrators."""
    return list(Orchestrator.objects.governed().order_by("name"))


def mode_of(orchestrator: Orchestrator) -> str:
    return orchestrator_access.governance_options(orchestrator).get("mode", REVIEW)


def gov_orchestrator(orchestrator: Orchestrator, *, kueue: bool = False) -> GovOrchestrator:
    """How governance maps onto ``orchestrator``, from its options (docs/governance.md, "Inputs")."""
    options = orchestrator_access.governance_options(orchestrator)
    pool_gpus = sum(orchestrator.nodes.values_list("gpu_total", flat=True))
    return GovOrchestrator(
        name=orchestrator.name,
        kind=OrchestratorKind(orchestrator.kind),
        gpu_model=options.get("gpu_model", ""),
        slurm_root_account=options.get("root_account", "root"),
        slurm_typed_gres=bool(options.get("typed_gres", False)),
        user_overrides=identity.owner_map(()).cluster_names(NameKind.SLURM_USER, orchestrator.name),
        volcano=bool(options.get("volcano", True)),
        kueue=kueue,
        kueue_cohort=options.get("kueue_cohort", "gpuportal"),
        kueue_flavor=options.get("kueue_flavor", "default-flavor"),
        kueue_reclaim=reclaim_settings(orchestrator).mode == "native",
        pool_gpus=pool_gpus,
        namespace_demand=entitlement_split.namespace_demand(orchestrator) if kind_k8s(orchestrator) else {},
    )


def kind_k8s(orchestrator: Orchestrator) -> bool:
    return orchestrator.kind == Orchestrator.Kind.KUBERNETES


def with_namespaces(data: GovernanceInput, orchestrator: Orchestrator) -> GovernanceInput:
    """``data`` with this Kubernetes orchestrator's namespace mapping (team -> namespaces) applied."""
    mapping = orchestrator_access.governance_options(orchestrator).get("namespaces") or {}
    if not mapping:
        return data
    slugs = {t.slug for t in data.teams}
    unknown = sorted(set(mapping) - slugs)
    if unknown:
        raise GovernanceInputError(
            [
                InputProblem("options.governance.namespaces", f"{orchestrator.name}: {name!r} is not a team")
                for name in unknown
            ]
        )
    teams = tuple(dataclasses.replace(t, namespaces=tuple(mapping.get(t.slug, ()))) for t in data.teams)
    return dataclasses.replace(data, teams=teams)


# ---------------------------------------------------------------------------------- the clusters


class Cluster(Protocol):
    """One orchestrator's governance objects: read them back, apply changes (idempotent, never raising)."""

    kueue: bool

    def read(self, desired: DesiredState) -> list[NativeObject]: ...

    def apply(self, changes: Sequence[Change]) -> list[ApplyResult]: ...


@dataclass
class SlurmCluster:
    writer: SlurmAccountingWriter
    kueue: bool = False

    def read(self, desired: DesiredState) -> list[NativeObject]:
        accounts, users = self.writer.read()
        return [*accounts, *users]

    def apply(self, changes: Sequence[Change]) -> list[ApplyResult]:
        return apply_slurm(changes, self.writer)


@dataclass
class KubernetesCluster:
    gov: KubernetesGovernance
    volcano: bool
    kueue: bool = False
    mapped: dict[str, list[str]] = field(default_factory=dict)  # options.governance.namespaces

    def read(self, desired: DesiredState) -> list[NativeObject]:
        missing_namespaces(self.mapped, self.gov.namespace_names())
        found: list[NativeObject] = [
            *self.gov.read_namespaces(), *self.gov.read_quotas(), *self.gov.read_priority_classes()
        ]
        if self.volcano:
            found += self.gov.read_volcano_queues()
        if self.kueue:
            found += [*self.gov.read_kueue_cluster_queues(), *self.gov.read_kueue_local_queues()]
        return found

    def apply(self, changes: Sequence[Change]) -> list[ApplyResult]:
        return apply_kubernetes(changes, self.gov)


def missing_namespaces(mapped: dict[str, list[str]], existing: set[str]) -> None:
    """An explicit mapping names namespaces where the team's workloads run: one missing from the cluster is
    almost surely a typo, and making it would cap an empty namespace while the real one stays uncapped. So the
    orchestrator's round stops there, before any write (docs/governance.md, "Namespaces: made or refused")."""
    problems = [
        InputProblem(f"options.governance.namespaces.{team}", f"namespace {name!r} does not exist on the cluster")
        for team, names in sorted(mapped.items())
        for name in names
        if name not in existing
    ]
    if problems:
        raise GovernanceInputError(problems)


def cluster_for(orchestrator: Orchestrator) -> Cluster:
    """The reader/writer of ``orchestrator``'s governance objects (tests replace it with a fake)."""
    options = orchestrator_access.governance_options(orchestrator)
    if orchestrator.kind == Orchestrator.Kind.SLURM:
        run, cluster, _env = orchestrator_access.slurm_accounting_access(orchestrator)
        return SlurmCluster(SlurmAccountingWriter(run, cluster))
    if orchestrator.kind == Orchestrator.Kind.KUBERNETES:
        gov = KubernetesGovernance(orchestrator_access.kubernetes_api(orchestrator))
        mapped = dict(options.get("namespaces") or {})
        return KubernetesCluster(gov, bool(options.get("volcano", True)), gov.kueue_installed(), mapped)
    return RayPool(orchestrator)


# -------------------------------------------------------------------------------------------- causes


def _causes() -> dict[str, tuple[str, Any]]:
    """Per team slug, the latest portal change to it (a queue edit, a grant, the team itself): text and author."""
    found: dict[str, tuple[datetime, str, Any, int | None]] = {}
    slugs = dict(Team.objects.values_list("pk", "slug"))
    for model, label in ((Queue, "queue"), (QuotaGrant, "grant"), (Team, "team")):
        history = model.history.model  # type: ignore[attr-defined]
        team_field = "id" if model is Team else "team_id"
        latest = history.objects.values(team_field).annotate(at=Max("history_date"))
        wanted = {(row[team_field], row["at"]) for row in latest}
        rows = history.objects.filter(history_date__in={at for _, at in wanted}).select_related("history_user")
        for row in rows:
            team_id = getattr(row, team_field)
            if (team_id, row.history_date) not in wanted or team_id not in slugs:
                continue
            slug = slugs[team_id]
            if slug in found and found[slug][0] >= row.history_date:
                continue
            who = row.history_user.get_username() if row.history_user else "the portal"
            verb = {"+": "created", "~": "changed", "-": "deleted"}.get(row.history_type, "changed")
            text = f"{label} of {slug} {verb} by {who} at {row.history_date:%Y-%m-%d %H:%M}"
            if row.history_change_reason:
                text += f": {row.history_change_reason}"
            found[slug] = (row.history_date, text, row.history_user, row.id if model is QuotaGrant else None)
    return {slug: _with_granter(text, user, grant_id) for slug, (_at, text, user, grant_id) in found.items()}


def _with_granter(text: str, user, grant_id: int | None) -> tuple[str, Any]:
    """A grant's period starting or ending is the portal's doing, but the person answerable is who granted it
    (an approval whose period has begun activates the grant at once, so that row is the latest)."""
    if user is not None or grant_id is None:
        return text, user
    history = QuotaGrant.history.model  # type: ignore[attr-defined]
    created = history.objects.filter(id=grant_id, history_type="+").select_related("history_user").first()
    if created is None or created.history_user is None:
        return text, user
    return f"{text} (granted by {created.history_user.get_username()})", created.history_user


# ----------------------------------------------------------------------------------------- one round


@dataclass
class OrchestratorRound:
    """What one round found and did on one orchestrator (the CLI's JSON, the outcome row)."""

    orchestrator: str
    mode: str
    applied: list[str] = field(default_factory=list)
    unchanged: int = 0
    drifted: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    pending: list[str] = field(default_factory=list)
    error: str = ""
    adopted: list[str] = field(default_factory=list)  # kept as an admin adopted them: the cluster's value stays
    read_back: bool = True  # False: the cluster could not be read, nothing is known of its objects this round
    teams: dict[str, str] = field(default_factory=dict)  # object id -> team slug, for the ids above

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def object_ids(self) -> dict[str, Any]:
        """The ids behind the counts, for the outcome row: only those not in step (the rest of what the round
        read back equals the portal's intent), so a round over thousands of objects stores a few ids."""
        lists = {name: getattr(self, name) for name in ("applied", "adopted", "drifted", "failed", "pending")}
        ids = {i for found in lists.values() for i in found}
        return {**lists, "teams": {i: t for i, t in self.teams.items() if i in ids and t}}


@dataclass
class _Plan:
    """The round's decisions for one orchestrator, before any write."""

    diff: GovernanceDiff
    desired: DesiredState
    to_apply: list[Change]
    held: list[Change]  # waiting on an open drift finding
    review: list[Change]  # review mode: waiting on a plan
    adopted: list[Change]  # kept as an admin adopted them
    findings: dict[str, DriftFinding]  # the finding each drift matched (by object id), if any
    causes: dict[str, tuple[str, Any]] = field(default_factory=dict)  # object id -> forced cause (reverts)


def _latest_findings(orchestrator: Orchestrator, ids: Iterable[str]) -> dict[str, DriftFinding]:
    latest: dict[str, DriftFinding] = {}
    for finding in DriftFinding.objects.filter(orchestrator=orchestrator, object_id__in=list(ids)).order_by(
        "found_at", "pk"
    ):
        latest[finding.object_id] = finding
    return latest


def _approved_entries(orchestrator: Orchestrator) -> dict[tuple[str, str], EnforcementPlan]:
    entries = {}
    for plan in EnforcementPlan.objects.filter(orchestrator=orchestrator, state=EnforcementPlan.State.APPROVED):
        for entry in plan.changes:
            entries[(entry["id"], _key(entry.get("desired")))] = plan
    return entries


def _key(data: dict[str, Any] | None) -> str:
    return repr(sorted((data or {}).items()))


def plan_round(
    orchestrator: Orchestrator, cluster: Cluster, data: GovernanceInput, at: datetime, split: Split | None = None
) -> _Plan:
    """Desired (the round's ``split`` of every team's entitlement), observed, diff, and which changes go ahead
    (no write, no row). Without ``split``, this orchestrator's own split (it alone holds the fleet)."""
    gov = gov_orchestrator(orchestrator, kueue=cluster.kueue)
    if gov.kind is OrchestratorKind.KUBERNETES:
        data = with_namespaces(data, orchestrator)
    if split is None:
        split = entitlement_split.round_split(data, [orchestrator], at, record=False)
    desired = desired_state(data, [gov], _epoch(at), split)[orchestrator.name]
    observed = cluster.read(desired)
    last = [
        from_json(row)
        for row in AppliedObject.objects.filter(orchestrator=orchestrator).values_list("settings", flat=True)
    ]
    result = diff(desired, observed, last)
    findings = _latest_findings(orchestrator, [d.id for d in result.drifts])
    matched = {
        d.id: findings[d.id]
        for d in result.drifts
        if d.id in findings and _key(findings[d.id].observed) == _key(to_json(d.observed))
    }
    plan = _Plan(result, desired, [], [], [], [], matched)
    adopted = {
        f.object_id: f for f in DriftFinding.objects.filter(orchestrator=orchestrator, state=DriftFinding.State.ADOPTED)
    }
    review = mode_of(orchestrator) == REVIEW
    approved = _approved_entries(orchestrator) if review else {}
    drifting = {d.id for d in result.drifts}
    for change in result.changes:
        if change.action is Action.UNCHANGED:
            continue
        finding = matched.get(change.id)
        if change.id in drifting and (finding is None or finding.state == DriftFinding.State.OPEN):
            plan.held.append(change)  # a new drift: an admin decides first
        elif change.id in adopted and _key(adopted[change.id].desired) == _key(to_json(change.desired)):
            plan.adopted.append(change)
        elif finding is not None and finding.state == DriftFinding.State.REVERTED:
            plan.to_apply.append(change)
            who = finding.decided_by.get_username() if finding.decided_by else "an admin"
            plan.causes[change.id] = (f"drift reverted by {who}: {finding.reason}", finding.decided_by)
        elif review and (change.id, _key(to_json(change.desired))) not in approved:
            plan.review.append(change)
        else:
            plan.to_apply.append(change)
    return plan


def reconcile_orchestrator(
    orchestrator: Orchestrator,
    data: GovernanceInput,
    at: datetime,
    run: EnforcementRun | None,
    *,
    dry_run: bool,
    split: Split | None = None,
) -> OrchestratorRound:
    """One orchestrator's round: read, diff, write (unless ``dry_run``), then record it in one transaction."""
    outcome = OrchestratorRound(orchestrator.name, mode_of(orchestrator))
    try:
        cluster = cluster_for(orchestrator)
        plan = plan_round(orchestrator, cluster, data, at, split)
    except (*UNREACHABLE, GovernanceInputError) as error:
        outcome.error = orchestrator_access.masked(f"{type(error).__name__}: {error}", orchestrator)
        outcome.pending = sorted(
            {*_still_pending(orchestrator), *_not_yet_applied(orchestrator, data, at, split)}
        )
        outcome.read_back = False
        if run is not None:
            _record_outcome(run, orchestrator, outcome)
        return outcome
    results = [] if dry_run else _apply(cluster, plan.to_apply)
    _count(outcome, plan, results, dry_run)
    outcome.teams = _object_teams(plan)
    _report_skipped(outcome, plan.desired)
    outcome.error = orchestrator_access.masked(outcome.error, orchestrator) if outcome.error else ""
    if dry_run:
        return outcome
    try:
        with transaction.atomic():
            _record_writes(orchestrator, plan, results, at)
            _record_drift(orchestrator, plan, at)
            _record_plans(orchestrator, plan, results, at)
            if run is not None:
                _record_outcome(run, orchestrator, outcome)
    except DatabaseError as error:
        # e.g. a concurrent round recorded the same objects first: nothing of this one is kept, the writes were
        # idempotent, and the next round finds them unchanged and records them.
        outcome.error = f"bookkeeping rolled back: {type(error).__name__}: {error}"
        if run is not None:
            _record_outcome(run, orchestrator, outcome)
    return outcome


def _apply(cluster: Cluster, changes: list[Change]) -> list[ApplyResult]:
    """The writers report each change's failure; a connection lost midway fails what was not reported."""
    try:
        return cluster.apply(changes)
    except UNREACHABLE as error:
        return [ApplyResult(c.id, c.action, False, f"{type(error).__name__}: {error}") for c in changes]


def _still_pending(orchestrator: Orchestrator) -> list[str]:
    """What waits on an unreachable orchestrator: its undecided and approved plans' changes."""
    plans = EnforcementPlan.objects.filter(
        orchestrator=orchestrator, state__in=(EnforcementPlan.State.PENDING, EnforcementPlan.State.APPROVED)
    )
    return sorted({entry["id"] for plan in plans for entry in plan.changes})


def _not_yet_applied(
    orchestrator: Orchestrator, data: GovernanceInput, at: datetime, split: Split | None = None
) -> list[str]:
    """On an orchestrator that could not be read: the portal's intent that no round has applied yet (desired
    objects whose last applied state differs), retried by the next round. Nothing when the intent itself is bad."""
    try:
        if orchestrator.kind == Orchestrator.Kind.KUBERNETES:
            data = with_namespaces(data, orchestrator)
        if split is None:
            split = entitlement_split.round_split(data, [orchestrator], at, record=False)
        desired = desired_state(data, [gov_orchestrator(orchestrator)], _epoch(at), split)[orchestrator.name]
    except GovernanceInputError:
        return []
    applied = dict(AppliedObject.objects.filter(orchestrator=orchestrator).values_list("object_id", "settings"))
    return [
        object_id(o)
        for o in desired.objects
        if not isinstance(o, RayPoolBounds) and _key(applied.get(object_id(o))) != _key(to_json(o))
    ]


def _object_teams(plan: _Plan) -> dict[str, str]:
    """Object id -> the team slug it enforces, for every object the round saw (wanted, found or both)."""
    namespaces = _namespace_teams(plan)
    return {c.id: team_of(c.desired or c.observed, namespaces) for c in plan.diff.changes}


def _count(outcome: OrchestratorRound, plan: _Plan, results: list[ApplyResult], dry_run: bool) -> None:
    outcome.unchanged = len(plan.diff.by_action(Action.UNCHANGED)) + len(plan.adopted)
    outcome.adopted = sorted(c.id for c in plan.adopted)
    outcome.drifted = sorted(
        d.id
        for d in plan.diff.drifts
        if d.id not in plan.findings or plan.findings[d.id].state == DriftFinding.State.OPEN
    )
    outcome.pending = sorted(c.id for c in [*plan.held, *plan.review])
    if dry_run:
        outcome.applied = [c.id for c in plan.to_apply]  # would be applied
        return
    outcome.applied = [r.id for r in results if not r.error]
    outcome.failed = [r.id for r in results if r.error]
    outcome.pending = sorted({*outcome.pending, *outcome.failed})
    if results and any(r.error for r in results):
        errors = "; ".join(f"{r.id}: {r.error}" for r in results if r.error)[:4000]
        outcome.error = errors


def _report_skipped(outcome: OrchestratorRound, desired: DesiredState) -> None:
    """Teams this orchestrator cannot name were left out alone: the round says so, the rest went ahead."""
    if desired.skipped:
        left_out = "; ".join(f"{p.field}: {p.message}" for p in desired.skipped)
        outcome.error = (f"left out: {left_out}" + (f"; {outcome.error}" if outcome.error else ""))[:4000]


def _cause_for(plan: _Plan, change: Change, causes: dict[str, tuple[str, Any]], teams: dict[str, str]):
    if change.id in plan.causes:
        return plan.causes[change.id]
    reasons = "; ".join(plan.desired.reasons.get(change.id, ()))
    text, user = causes.get(team_of(change.desired or change.observed, teams), (ROUND_CAUSE, None))
    return (
        f"{change.action.value} ({reasons}) after {text}" if reasons else f"{change.action.value} after {text}",
        user,
    )


def _namespace_teams(plan: _Plan) -> dict[str, str]:
    return {o.name: o.team for o in plan.desired.objects if isinstance(o, K8sNamespace)}


def _record_writes(orchestrator: Orchestrator, plan: _Plan, results: list[ApplyResult], at: datetime) -> None:
    """AppliedObject rows for every change written (history: the cause), and for objects found as desired."""
    done = {r.id for r in results if not r.error}
    teams = _namespace_teams(plan)
    causes = _causes() if done else {}
    rows = {row.object_id: row for row in AppliedObject.objects.filter(orchestrator=orchestrator)}
    for change in plan.to_apply:
        if change.id not in done or isinstance(change.desired, RayPoolBounds):
            continue  # a Ray ceiling held by stopping jobs: audited as a ReclaimPlan, not an object written
        text, user = _cause_for(plan, change, causes, teams)
        row = rows.get(change.id)
        if change.action is Action.DELETE:
            if row is not None:
                row._change_reason = text[:2000]  # type: ignore[attr-defined]
                row._history_user = user  # type: ignore[attr-defined]
                row.delete()
            continue
        _save_applied(orchestrator, row, change.desired, text, user, at, team_of(change.desired, teams))
    for change in plan.diff.by_action(Action.UNCHANGED):
        if isinstance(change.desired, RayPoolBounds):
            continue  # pool-level, written by the rebalancer: nothing of the portal's to record here
        row = rows.get(change.id)
        if row is None or _key(row.settings) != _key(to_json(change.desired)):
            text = "found on the cluster as the portal wants it"
            _save_applied(orchestrator, row, change.desired, text, None, at, team_of(change.desired, teams))


def _save_applied(orchestrator, row, obj, cause: str, user, at: datetime, team: str) -> AppliedObject:
    if row is None:
        row = AppliedObject(orchestrator=orchestrator, object_id=object_id(obj), kind=obj.kind.value)
    row.settings, row.applied_at, row.cause, row.caused_by, row.team = to_json(obj), at, cause[:2000], user, team
    row._change_reason = cause[:2000]  # type: ignore[attr-defined]
    row._history_user = user  # type: ignore[attr-defined]
    row.save()
    return row


def _record_drift(orchestrator: Orchestrator, plan: _Plan, at: datetime) -> None:
    """A finding per new drift (or the open one updated when edited again); open ones that went away close."""
    teams = _namespace_teams(plan)
    desired = {object_id(o): o for o in plan.desired.objects}
    drifting = set()
    for drift in plan.diff.drifts:
        drifting.add(drift.id)
        if drift.id in plan.findings:
            continue
        fields = [{"field": f.field, "before": _plain(f.before), "after": _plain(f.after)} for f in drift.fields]
        values = {
            "team": team_of(drift.applied, teams),
            "applied": to_json(drift.applied),
            "observed": to_json(drift.observed),
            "desired": to_json(desired.get(drift.id)),
            "fields": fields,
            "found_at": at,
        }
        finding, found = DriftFinding.objects.update_or_create(
            orchestrator=orchestrator, object_id=drift.id, state=DriftFinding.State.OPEN, defaults=values
        )
        if found:
            transaction.on_commit(partial(notifications.drift_found, finding))
    gone = DriftFinding.objects.filter(orchestrator=orchestrator, state=DriftFinding.State.OPEN).exclude(
        object_id__in=drifting
    )
    for finding in gone:
        finding.state, finding.decided_at = DriftFinding.State.REVERTED, at
        finding.reason = "the cluster holds what the portal applied again"
        finding.save()


def _record_plans(orchestrator: Orchestrator, plan: _Plan, results: list[ApplyResult], at: datetime) -> None:
    """Review mode: one pending plan with what waits (a newer one supersedes it); approved plans end once
    none of their changes is still needed."""
    failed = {r.id for r in results if r.error}
    still_needed = {(c.id, _key(to_json(c.desired))) for c in plan.to_apply if c.id in failed}
    for approved in EnforcementPlan.objects.filter(orchestrator=orchestrator, state=EnforcementPlan.State.APPROVED):
        if not any((e["id"], _key(e.get("desired"))) in still_needed for e in approved.changes):
            approved.state = EnforcementPlan.State.APPLIED
            approved._change_reason = "applied by the governance round"  # type: ignore[attr-defined]
            approved.save()
    teams = _namespace_teams(plan)
    entries = [_change_json(c, dict(plan.desired.reasons), teams) for c in plan.review]
    pending = EnforcementPlan.objects.filter(orchestrator=orchestrator, state=EnforcementPlan.State.PENDING)
    current = pending.first()
    if current is not None and entries and _entries_key(current.changes) == _entries_key(entries):
        return
    for old in pending:
        old.state = EnforcementPlan.State.SUPERSEDED
        old._change_reason = "superseded by a newer diff"  # type: ignore[attr-defined]
        old.save()
    if entries:
        causes = _causes()
        why = sorted({causes.get(e["team"], (ROUND_CAUSE, None))[0] for e in entries})
        EnforcementPlan.objects.create(
            orchestrator=orchestrator, changes=entries, created_at=at, cause="; ".join(why)[:4000]
        )


def _entries_key(entries: list[dict[str, Any]]) -> list[tuple[str, str, str]]:
    return sorted((e["id"], e["action"], _key(e.get("desired"))) for e in entries)


def _record_outcome(run: EnforcementRun, orchestrator: Orchestrator, outcome: OrchestratorRound) -> None:
    EnforcementOutcome.objects.create(
        run=run,
        orchestrator=orchestrator,
        mode=outcome.mode,
        applied=len(outcome.applied),
        unchanged=outcome.unchanged,
        drifted=len(outcome.drifted),
        failed=len(outcome.failed),
        pending=len(outcome.pending),
        error=orchestrator_access.masked(outcome.error, orchestrator),
        object_ids=outcome.object_ids(),
        read_back=outcome.read_back,
    )


class RoundInProgress(Exception):
    """Another governance round holds the lease: ONE round at a time, or two rounds would diff against each
    other's half-recorded writes and file the other's changes as drift."""

    @classmethod
    def of(cls, run: EnforcementRun) -> RoundInProgress:
        beat = run.heartbeat_at or run.started_at
        return cls(
            f"governance round {run.pk} is in progress (started {run.started_at:%H:%M:%S} UTC, "
            f"last sign of life {beat:%H:%M:%S} UTC)"
        )  # a message only: Celery pickles it when the triggered task retries


class LeaseLost(Exception):
    """This round's lease was taken from it: its heartbeat went stale and a later round closed it as cut short."""


def begin_round(requested_at: datetime | None = None, *, at: datetime | None = None) -> EnforcementRun | None:
    """Claim the one round lease: the ``EnforcementRun`` row of a round that begins now. ``requested_at`` (a
    triggered round): None when a round that began after that moment has read the change already.

    Raises ``RoundInProgress`` while another round holds the lease (unfinished, heartbeat younger than
    ``GPUPORTAL_GOVERNANCE_ROUND_STALE_S``). A holder whose heartbeat went stale is taken for dead (its worker
    killed, its time limit hit): it is closed as cut short, and its orchestrators not reached keep the state
    their last round recorded. The check and the claim run under one row lock, so two workers never both win."""
    with transaction.atomic():
        lock_capacity("governance-round")
        now = timezone.now()
        if (
            requested_at is not None
            and EnforcementRun.objects.filter(dry_run=False, started_at__gte=requested_at).exists()
        ):
            return None
        unfinished = EnforcementRun.objects.filter(dry_run=False, finished_at__isnull=True)
        stale_before = now - timedelta(seconds=settings.GPUPORTAL_GOVERNANCE_ROUND_STALE_S)
        live = unfinished.filter(heartbeat_at__gte=stale_before).order_by("-started_at").first()
        if live is not None:
            raise RoundInProgress.of(live)
        for dead in unfinished:
            beat = dead.heartbeat_at or dead.started_at
            dead.finished_at = now
            dead.error = (
                f"cut short: no sign of life since {beat:%Y-%m-%d %H:%M:%S} UTC (worker killed or out of time); "
                f"orchestrators it did not reach keep their last round's state. {dead.error}"
            ).strip()[:8000]
            dead.save(update_fields=["finished_at", "error"])
        return EnforcementRun.objects.create(started_at=at or now, heartbeat_at=now)


def _heartbeat(run: EnforcementRun) -> None:
    """The holder's sign of life, before each orchestrator; a lease taken from it (closed) stops the round."""
    if not EnforcementRun.objects.filter(pk=run.pk, finished_at__isnull=True).update(heartbeat_at=timezone.now()):
        raise LeaseLost(f"governance round {run.pk} was closed as cut short by a later round")


def reconcile(
    *, dry_run: bool = False, at: datetime | None = None, run: EnforcementRun | None = None
) -> list[OrchestratorRound]:
    """One round over every governed orchestrator; one failing leaves the others to proceed. ``run``: the row
    of a round claimed already (``begin_round``). Raises ``RoundInProgress`` when another round holds the lease
    (a dry run needs none: it writes nothing)."""
    if run is None and not dry_run:
        run = begin_round(at=at)
    at = run.started_at if run is not None else at or timezone.now()
    outcomes: list[OrchestratorRound] = []
    orchestrators = governed_orchestrators()
    try:
        if orchestrators:
            data = governance_input(at)
            # one split of every team's fleet entitlement over all of them, saved as the next round's "previous"
            split = entitlement_split.round_split(data, orchestrators, at, record=not dry_run)
            for orchestrator in orchestrators:
                if run is not None:
                    _heartbeat(run)
                outcomes.append(reconcile_orchestrator(orchestrator, data, at, run, dry_run=dry_run, split=split))
    except LeaseLost:
        return outcomes  # a later round holds the lease now and closed this one's row: nothing more to record
    if run is not None:
        prune_runs(at)
        error = "; ".join(f"{o.orchestrator}: {o.error}" for o in outcomes if o.error)[:8000]
        EnforcementRun.objects.filter(pk=run.pk, finished_at__isnull=True).update(
            finished_at=timezone.now(), error=error
        )  # only the holder finishes its round
    return outcomes


def reconcile_requested(requested_at: datetime) -> list[OrchestratorRound] | None:
    """The round a change asked for (services/governance_trigger.py), or None when a round that began after
    ``requested_at`` has read that change already: a burst of changes makes one round. Raises
    ``RoundInProgress`` when an older round is still going: the caller tries again once it is over."""
    run = begin_round(requested_at)
    return None if run is None else reconcile(run=run)


def prune_runs(now: datetime) -> int:
    """Rounds older than the sample retention go (one per round and orchestrator adds up); audit rows stay."""
    cutoff = now - timedelta(days=settings.GPUPORTAL_SAMPLE_RETENTION_DAYS)
    deleted, _ = EnforcementRun.objects.filter(started_at__lt=cutoff).delete()
    return deleted


# -------------------------------------------------------------------------------------- decisions


def _decide(model, pk: int, waiting: str, state: str, *, by, reason: str, seen_version: int | None = None):
    """Move a row waiting for a decision to ``state``, locked against a concurrent decision, with who and why
    in its history; a row decided already is refused, and a versioned one changed since ``seen_version`` (the
    decider's page or If-Match) is refused naming who changed what, when."""
    instance = model.objects.select_for_update().get(pk=pk)
    versions.require_version(instance, seen_version, f"{model._meta.verbose_name} #{pk}".capitalize())
    if instance.state != waiting:
        what = model._meta.verbose_name
        raise ValidationError({"state": f"This {what} is {instance.state}, not {waiting}: it was decided already."})
    instance.state, instance.decided_by, instance.decided_at = state, by, timezone.now()
    instance.reason = require_reason(reason)
    stamp_author(instance, by=by, reason=reason)
    instance.save()
    return instance


@transaction.atomic
def approve_plan(plan: EnforcementPlan, *, by, reason: str, seen_version: int | None = None) -> EnforcementPlan:
    """The next round applies the plan's changes that are still needed."""
    decided = _decide_plan(plan, EnforcementPlan.State.APPROVED, by=by, reason=reason, seen_version=seen_version)
    governance_trigger.request_round()
    return decided


@transaction.atomic
def reject_plan(plan: EnforcementPlan, *, by, reason: str, seen_version: int | None = None) -> EnforcementPlan:
    return _decide_plan(plan, EnforcementPlan.State.REJECTED, by=by, reason=reason, seen_version=seen_version)


def _decide_plan(plan: EnforcementPlan, state: str, **decision) -> EnforcementPlan:
    return _decide(EnforcementPlan, plan.pk, EnforcementPlan.State.PENDING, state, **decision)


@transaction.atomic
def revert_drift(finding: DriftFinding, *, by, reason: str) -> DriftFinding:
    """The next round writes the portal's intent over the hand edit (audited with this decision as cause)."""
    decided = _decide(
        DriftFinding, finding.pk, DriftFinding.State.OPEN, DriftFinding.State.REVERTED, by=by, reason=reason
    )
    governance_trigger.request_round()
    return decided


@transaction.atomic
def adopt_drift(finding: DriftFinding, *, by, reason: str) -> DriftFinding:
    """Keep the hand edit: what the cluster holds becomes what the portal applied, and the portal leaves the
    object alone until its own intent for it changes."""
    finding = _decide(
        DriftFinding, finding.pk, DriftFinding.State.OPEN, DriftFinding.State.ADOPTED, by=by, reason=reason
    )
    row = AppliedObject.objects.filter(orchestrator=finding.orchestrator, object_id=finding.object_id).first()
    cause = f"drift adopted by {by.get_username()}: {finding.reason}"
    if finding.observed is None:
        if row is not None:
            stamp_author(row, by=by, reason=cause[:2000])
            row.delete()
    else:
        obj = from_json(finding.observed)
        _save_applied(finding.orchestrator, row, obj, cause, by, timezone.now(), finding.team)
    return finding
