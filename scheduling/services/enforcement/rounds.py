"""The governance round: each round builds the portal's intent from the ORM (``intent.py``), reads each
orchestrator's native objects back through the collectors (``collectors/governance_clusters.py``), diffs them, and
applies the changes (*auto*) or stores them as a plan an admin approves (*review*, the default); what it did is
recorded by ``decisions.py``. docs/governance.md says why.

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

from collections.abc import Iterable
from datetime import datetime, timedelta

from django.conf import settings
from django.db import DatabaseError, transaction
from django.utils import timezone
from urllib3.exceptions import HTTPError as TransportError

from scheduling.collectors import CollectorError
from scheduling.collectors.governance_apply import ApplyResult
from scheduling.collectors.governance_clusters import Cluster, KubernetesCluster, SlurmCluster
from scheduling.collectors.k8s_governance import KubernetesGovernance
from scheduling.collectors.slurm_accounting import SlurmAccountingWriter
from scheduling.engine.entitlement_split import Split
from scheduling.engine.governance_state import (
    Action,
    Change,
    DesiredState,
    GovernanceInput,
    GovernanceInputError,
    desired_state,
    diff,
    object_id,
)
from scheduling.engine.governance_types import RayPoolBounds
from scheduling.engine.types import OrchestratorKind
from scheduling.models import AppliedObject, DriftFinding, EnforcementPlan, EnforcementRun, Orchestrator
from scheduling.selectors.retention import raw_kept_since

from .. import entitlement_split
from .. import orchestrators as orchestrator_access
from ..capacity import lock_capacity
from ..reclaim import RayPool
from .decisions import (
    OrchestratorRound,
    RoundPlan,
    from_json,
    namespace_teams,
    record_drift,
    record_outcome,
    record_plans,
    record_writes,
    settings_key,
    to_json,
)
from .intent import (
    REVIEW,
    gov_orchestrator,
    governance_input,
    governed_orchestrators,
    mode_of,
    team_of,
    with_namespaces,
)

# What a cluster's reader or writer may raise when it is down: a collector's error, the OS's, the transport's.
UNREACHABLE = (CollectorError, OSError, TransportError)


def _epoch(moment: datetime) -> float:
    return moment.timestamp()


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
            entries[(entry["id"], settings_key(entry.get("desired")))] = plan
    return entries


def plan_round(
    orchestrator: Orchestrator, cluster: Cluster, data: GovernanceInput, at: datetime, split: Split | None = None
) -> RoundPlan:
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
        if d.id in findings and settings_key(findings[d.id].observed) == settings_key(to_json(d.observed))
    }
    plan = RoundPlan(result, desired, [], [], [], [], matched)
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
        elif change.id in adopted and settings_key(adopted[change.id].desired) == settings_key(to_json(change.desired)):
            plan.adopted.append(change)
        elif finding is not None and finding.state == DriftFinding.State.REVERTED:
            plan.to_apply.append(change)
            who = finding.decided_by.get_username() if finding.decided_by else "an admin"
            plan.causes[change.id] = (f"drift reverted by {who}: {finding.reason}", finding.decided_by)
        elif review and (change.id, settings_key(to_json(change.desired))) not in approved:
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
            record_outcome(run, orchestrator, outcome)
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
            record_writes(orchestrator, plan, results, at)
            record_drift(orchestrator, plan, at)
            record_plans(orchestrator, plan, results, at)
            if run is not None:
                record_outcome(run, orchestrator, outcome)
    except DatabaseError as error:
        # e.g. a concurrent round recorded the same objects first: nothing of this one is kept, the writes were
        # idempotent, and the next round finds them unchanged and records them.
        outcome.error = f"bookkeeping rolled back: {type(error).__name__}: {error}"
        if run is not None:
            record_outcome(run, orchestrator, outcome)
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
        if not isinstance(o, RayPoolBounds) and settings_key(applied.get(object_id(o))) != settings_key(to_json(o))
    ]


def _object_teams(plan: RoundPlan) -> dict[str, str]:
    """Object id -> the team slug it enforces, for every object the round saw (wanted, found or both)."""
    namespaces = namespace_teams(plan)
    return {c.id: team_of(c.desired or c.observed, namespaces) for c in plan.diff.changes}


def _count(outcome: OrchestratorRound, plan: RoundPlan, results: list[ApplyResult], dry_run: bool) -> None:
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
    """Rounds older than the raw-history retention go (one per round and orchestrator adds up); audit rows stay.
    The retention task prunes them too, in batches (services/retention.py); this keeps a round's own table short."""
    cutoff = raw_kept_since(now)
    deleted, _ = EnforcementRun.objects.filter(started_at__lt=cutoff).delete()
    return deleted
