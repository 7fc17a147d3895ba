"""What governance records and who decided it: the round's plan for one orchestrator (``RoundPlan``) and its
outcome, the ``AppliedObject`` rows with their cause and author, drift findings, review plans, and the admins'
decisions on them (approve, reject, revert, adopt), each audited with who and why. Native objects are stored as
JSON (``to_json``/``from_json``), the form the next round's diff reads back.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial
from typing import Any, get_args

from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Max
from django.utils import timezone

from scheduling.collectors.governance_apply import ApplyResult
from scheduling.engine.governance_state import Action, Change, DesiredState, GovernanceDiff, object_id
from scheduling.engine.governance_types import K8sNamespace, NativeObject, RayPoolBounds
from scheduling.models import (
    AppliedObject,
    DriftFinding,
    EnforcementOutcome,
    EnforcementPlan,
    EnforcementRun,
    Orchestrator,
    Queue,
    QuotaGrant,
    Team,
)

from .. import governance_trigger, notifications, versions
from .. import orchestrators as orchestrator_access
from ..audit import require_reason, stamp_author
from .intent import team_of

# Every native object type by its kind: the members of ``NativeObject`` (a new type joins by being added there).
NATIVE_TYPES: dict[str, type] = {t.kind.value: t for t in get_args(NativeObject)}
ROUND_CAUSE = "governance round"


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


def _plain(value: object) -> object:
    return [list(v) if isinstance(v, tuple) else v for v in value] if isinstance(value, tuple) else value


def settings_key(data: dict[str, Any] | None) -> str:
    return repr(sorted((data or {}).items()))


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
class RoundPlan:
    """The round's decisions for one orchestrator, before any write."""

    diff: GovernanceDiff
    desired: DesiredState
    to_apply: list[Change]
    held: list[Change]  # waiting on an open drift finding
    review: list[Change]  # review mode: waiting on a plan
    adopted: list[Change]  # kept as an admin adopted them
    findings: dict[str, DriftFinding]  # the finding each drift matched (by object id), if any
    causes: dict[str, tuple[str, Any]] = field(default_factory=dict)  # object id -> forced cause (reverts)


def namespace_teams(plan: RoundPlan) -> dict[str, str]:
    return {o.name: o.team for o in plan.desired.objects if isinstance(o, K8sNamespace)}


def _cause_for(plan: RoundPlan, change: Change, causes: dict[str, tuple[str, Any]], teams: dict[str, str]):
    if change.id in plan.causes:
        return plan.causes[change.id]
    reasons = "; ".join(plan.desired.reasons.get(change.id, ()))
    text, user = causes.get(team_of(change.desired or change.observed, teams), (ROUND_CAUSE, None))
    return (
        f"{change.action.value} ({reasons}) after {text}" if reasons else f"{change.action.value} after {text}",
        user,
    )


def record_writes(orchestrator: Orchestrator, plan: RoundPlan, results: list[ApplyResult], at: datetime) -> None:
    """AppliedObject rows for every change written (history: the cause), and for objects found as desired."""
    done = {r.id for r in results if not r.error}
    teams = namespace_teams(plan)
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
        if row is None or settings_key(row.settings) != settings_key(to_json(change.desired)):
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


def record_drift(orchestrator: Orchestrator, plan: RoundPlan, at: datetime) -> None:
    """A finding per new drift (or the open one updated when edited again); open ones that went away close."""
    teams = namespace_teams(plan)
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


def record_plans(orchestrator: Orchestrator, plan: RoundPlan, results: list[ApplyResult], at: datetime) -> None:
    """Review mode: one pending plan with what waits (a newer one supersedes it); approved plans end once
    none of their changes is still needed."""
    failed = {r.id for r in results if r.error}
    still_needed = {(c.id, settings_key(to_json(c.desired))) for c in plan.to_apply if c.id in failed}
    for approved in EnforcementPlan.objects.filter(orchestrator=orchestrator, state=EnforcementPlan.State.APPROVED):
        if not any((e["id"], settings_key(e.get("desired"))) in still_needed for e in approved.changes):
            approved.state = EnforcementPlan.State.APPLIED
            approved._change_reason = "applied by the governance round"  # type: ignore[attr-defined]
            approved.save()
    teams = namespace_teams(plan)
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
    return sorted((e["id"], e["action"], settings_key(e.get("desired"))) for e in entries)


def record_outcome(run: EnforcementRun, orchestrator: Orchestrator, outcome: OrchestratorRound) -> None:
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
