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

RAY_NOTE = (
    "Ray: pool-level only (Ray has no per-team quota: team caps there are observed, not enforced; the pool "
    "ceiling is read back from what its jobs hold and kept by stopping borrowed jobs)"
)
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


@dataclass(frozen=True)
class ShareEnforcement:
    """What one orchestrator holds of one team's share, for the fair-share editor."""

    orchestrator: str
    status: str  # enforced | drift | pending | failed | "" (nothing applied yet)
    enforced: str  # e.g. "Fairshare 4000 · GrpTRES gres/gpu=48", "weight 2000 · capability 12 GPUs"


SHARE_OBJECTS = ("slurm_account", "volcano_queue")  # the objects that carry a team's weight and cap


def share_enforcement() -> tuple[dict[str, list[ShareEnforcement]], list[str]]:
    """Per team slug, each governed Slurm and Kubernetes orchestrator's hold of its share as of the last round;
    and the Ray orchestrators, whose enforcement is pool-level only. Four queries, whatever the team count."""
    outcomes = _latest_outcomes()
    orchestrators = list(Orchestrator.objects.filter(pk__in=outcomes.keys()).order_by("name"))
    applied = {
        (a.orchestrator_id, a.team): a for a in AppliedObject.objects.filter(kind__in=SHARE_OBJECTS).exclude(team="")
    }
    drifting = set(DriftFinding.objects.filter(state=DriftFinding.State.OPEN).values_list("orchestrator_id", "team"))
    waiting = {
        (plan.orchestrator_id, entry.get("team"))
        for plan in EnforcementPlan.objects.filter(state__in=WAITING)
        for entry in plan.changes
    }
    found: dict[str, list[ShareEnforcement]] = {}
    for slug in Team.objects.order_by("slug").values_list("slug", flat=True):
        for o in orchestrators:
            if o.kind == Orchestrator.Kind.RAY:
                continue
            row = applied.get((o.pk, slug))
            key = (o.pk, slug)
            status = (
                "drift" if key in drifting
                else "pending" if key in waiting
                else "failed" if outcomes[o.pk].error
                else "enforced" if row is not None
                else ""
            )  # fmt: skip
            found.setdefault(slug, []).append(ShareEnforcement(o.name, status, _share_text(row)))
    return found, [o.name for o in orchestrators if o.kind == Orchestrator.Kind.RAY]


def _share_text(row: AppliedObject | None) -> str:
    if row is None:
        return "not applied yet"
    settings = row.settings or {}
    if row.kind == "slurm_account":
        caps = " ".join(f"{name}={count}" for name, count in settings.get("grp_tres") or ())
        return f"Fairshare {settings.get('fairshare')}" + (f" · GrpTRES {caps}" if caps else "")
    capability = settings.get("capability_gpus")
    cap = "uncapped" if capability is None else f"capability {capability} GPUs"
    return f"weight {settings.get('weight')} · guarantee {settings.get('guarantee_gpus')} · {cap}"
