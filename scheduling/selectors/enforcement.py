"""Reads of enforced governance for the pages: per orchestrator, the portal's intent beside what the clusters
hold as of the last round (services/enforcement.py reads them back every round), with drift and pending
changes marked; and the admin page's rounds, plans and drift findings."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db.models import Max

from scheduling.models import (
    AdmissionDecision,
    AppliedObject,
    DriftFinding,
    EnforcementOutcome,
    EnforcementPlan,
    EnforcementRun,
    Orchestrator,
    Team,
)

RAY_NOTE = "Ray: pool-level only (Ray has no per-team quota; the pool's autoscaler bounds are enforced)"
WAITING = (EnforcementPlan.State.PENDING, EnforcementPlan.State.APPROVED)
HIDDEN = {"kind", "name", "namespace", "user", "account", "orchestrator"}  # identity, shown in the object id


@dataclass
class EnforcedObject:
    object_id: str
    kind: str
    intent: dict[str, Any] | None  # what the portal wants
    enforced: dict[str, Any] | None  # what the cluster held at the last round (None: not there)
    drift: bool = False
    pending: bool = False

    @property
    def in_step(self) -> bool:
        return not self.drift and not self.pending and self.intent == self.enforced


@dataclass
class OrchestratorEnforcement:
    orchestrator: str
    kind: str
    mode: str
    last_round_at: datetime | None
    last_error: str
    pool_level_only: bool
    objects: list[EnforcedObject] = field(default_factory=list)
    note: str = ""


def _settings(data: dict[str, Any] | None) -> dict[str, Any] | None:
    return None if data is None else {k: v for k, v in data.items() if k not in HIDDEN}


def _latest_outcomes() -> dict[int, EnforcementOutcome]:
    """Each orchestrator's outcome in the latest round that reached it (rows are added in round order)."""
    latest = (
        EnforcementOutcome.objects.values("orchestrator_id").annotate(last=Max("pk")).values_list("last", flat=True)
    )
    return {o.orchestrator_id: o for o in EnforcementOutcome.objects.filter(pk__in=list(latest)).select_related("run")}


def team_enforcement(team: Team) -> list[OrchestratorEnforcement]:
    """Per governed orchestrator, the team's native objects: intent, enforced, drift and pending marks."""
    outcomes = _latest_outcomes()
    orchestrators = Orchestrator.objects.filter(pk__in=outcomes.keys()).order_by("name")
    applied = _by_orchestrator(AppliedObject.objects.filter(team=team.slug))
    drifts = _by_orchestrator(DriftFinding.objects.filter(team=team.slug, state=DriftFinding.State.OPEN))
    plans = _by_orchestrator(EnforcementPlan.objects.filter(state__in=WAITING).order_by("created_at"))
    rows = []
    for orchestrator in orchestrators:
        outcome = outcomes[orchestrator.pk]
        ray = orchestrator.kind == Orchestrator.Kind.RAY
        row = OrchestratorEnforcement(
            orchestrator.name,
            orchestrator.kind,
            outcome.mode,
            outcome.run.started_at,
            outcome.error,
            ray,
            note=RAY_NOTE if ray else "",
        )
        if not ray:
            row.objects = _objects(
                applied.get(orchestrator.pk, []),
                drifts.get(orchestrator.pk, []),
                [e for p in plans.get(orchestrator.pk, []) for e in p.changes if e.get("team") == team.slug],
            )
        rows.append(row)
    return rows


def _by_orchestrator(rows) -> dict[int, list]:
    grouped: dict[int, list] = {}
    for row in rows:
        grouped.setdefault(row.orchestrator_id, []).append(row)
    return grouped


def _objects(applied: list[AppliedObject], drifts: list[DriftFinding], waiting: list[dict]) -> list[EnforcedObject]:
    found = {
        a.object_id: EnforcedObject(a.object_id, a.kind, _settings(a.settings), _settings(a.settings)) for a in applied
    }
    for entry in waiting:
        obj = found.get(entry["id"])
        kind = (entry.get("desired") or entry.get("observed") or {}).get("kind", "")
        if obj is None:
            obj = found[entry["id"]] = EnforcedObject(entry["id"], kind, None, _settings(entry.get("observed")))
        obj.intent, obj.pending = _settings(entry.get("desired")), True
    for finding in drifts:
        obj = found.get(finding.object_id)
        if obj is None:
            obj = found[finding.object_id] = EnforcedObject(
                finding.object_id, finding.applied.get("kind", ""), None, None
            )
        obj.intent = _settings(finding.desired)
        obj.enforced, obj.drift = _settings(finding.observed), True
    return sorted(found.values(), key=lambda o: (o.kind, o.object_id))


@dataclass
class GovernancePage:
    runs: list[EnforcementRun]
    plans: list[EnforcementPlan]
    open_drifts: list[DriftFinding]
    decided_drifts: list[DriftFinding]
    decided_plans: list[EnforcementPlan]
    bypassed: list[AdmissionDecision] = field(default_factory=list)
    admissions: list[AdmissionDecision] = field(default_factory=list)


def governance_page(limit: int = 20) -> GovernancePage:
    """The admin page: recent rounds with their outcomes, plans and drift waiting for a decision, recent decisions;
    and admission: the latest "admission bypassed" findings and the webhook's latest answers."""
    runs = list(EnforcementRun.objects.prefetch_related("outcomes__orchestrator")[:limit])
    plans = EnforcementPlan.objects.select_related("orchestrator", "decided_by")
    drifts = DriftFinding.objects.select_related("orchestrator", "decided_by")
    admissions = AdmissionDecision.objects.select_related("team")
    return GovernancePage(
        runs=runs,
        plans=list(plans.filter(state=EnforcementPlan.State.PENDING)),
        open_drifts=list(drifts.filter(state=DriftFinding.State.OPEN)),
        decided_drifts=list(drifts.exclude(state=DriftFinding.State.OPEN)[:limit]),
        decided_plans=list(plans.exclude(state=EnforcementPlan.State.PENDING)[:limit]),
        bypassed=list(admissions.filter(bypassed=True)[:limit]),
        admissions=list(admissions.filter(bypassed=False)[:limit]),
    )
