"""Reads of enforced governance for the pages: per orchestrator, the portal's intent beside what the clusters
hold as of the last round (services/enforcement.py reads them back every round), with drift and pending
changes marked; and the admin page's rounds, plans and drift findings."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db.models import Max

from scheduling.engine.governance_state import RAY_POOL_ONLY
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
from scheduling.models.fleet import DEMO_PREFIX

DEMO_CLUSTER = "the demo's simulated cluster"  # why governance leaves a demo:// orchestrator alone
RAY_NOTE = RAY_POOL_ONLY  # the engine's note on every Ray desired state, shown as it is
WAITING = (EnforcementPlan.State.PENDING, EnforcementPlan.State.APPROVED)
HIDDEN = {"kind", "name", "namespace", "user", "account", "orchestrator"}  # identity, shown in the object id
# What a page may say of an object, worst first when a team has several (share_enforcement). Only "enforced"
# claims the cluster holds the portal's intent: the last round read it back equal.
STATES = ("drift", "failed", "pending", "adopted", "applied", "unverified", "enforced")


@dataclass
class EnforcedObject:
    object_id: str
    kind: str
    intent: dict[str, Any] | None  # what the portal wants (None: the portal wants no such object)
    enforced: dict[str, Any] | None  # what the cluster held at the last round (None: not there)
    drift: bool = False
    pending: bool = False
    state: str = "enforced"  # one of STATES
    note: str = ""

    @property
    def in_step(self) -> bool:
        return self.state == "enforced"


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
    read_back_at: datetime | None = None  # the last round that could read the cluster
    read_back: bool = True  # False: the last round could not read it (states are as of ``read_back_at``)


def _settings(data: dict[str, Any] | None) -> dict[str, Any] | None:
    return None if data is None else {k: v for k, v in data.items() if k not in HIDDEN}


def latest_outcomes(read_back_only: bool = False) -> dict[int, EnforcementOutcome]:
    """Each orchestrator's outcome in the latest round that reached it (rows are added in round order);
    ``read_back_only``: in the latest round that could read its cluster."""
    rows = EnforcementOutcome.objects.filter(read_back=True) if read_back_only else EnforcementOutcome.objects.all()
    latest = rows.values("orchestrator_id").annotate(last=Max("pk")).values_list("last", flat=True)
    return {o.orchestrator_id: o for o in EnforcementOutcome.objects.filter(pk__in=list(latest)).select_related("run")}


@dataclass(frozen=True)
class RoundView:
    """What the last rounds tell of one orchestrator's objects: the latest outcome, and the latest that read the
    cluster back (its per-object lists say which objects are not in step)."""

    latest: EnforcementOutcome
    read: EnforcementOutcome | None

    def listed(self, name: str) -> set[str]:
        return set((self.read.object_ids or {}).get(name) or ()) if self.read is not None else set()

    def teams(self) -> dict[str, str]:
        return dict((self.read.object_ids or {}).get("teams") or {}) if self.read is not None else {}

    def state_of(self, object_id: str) -> str:
        """An object the portal applied: failed, applied (written, read back next round), adopted, enforced; and
        unverified when the last round could not read the cluster (enforced as of an earlier round)."""
        for name, state in (("failed", "failed"), ("adopted", "adopted"), ("applied", "applied")):
            if object_id in self.listed(name):
                return state
        return "enforced" if self.latest.read_back else "unverified"


def _round_views() -> dict[int, RoundView]:
    latest, read = latest_outcomes(), latest_outcomes(read_back_only=True)
    return {pk: RoundView(outcome, read.get(pk)) for pk, outcome in latest.items()}


def _adopted_findings(team: str | None = None) -> dict[tuple[int, str], DriftFinding]:
    """The latest adopted finding per (orchestrator id, object id): its ``desired`` is what the portal wants
    while the adopted value stays on the cluster."""
    rows = DriftFinding.objects.filter(state=DriftFinding.State.ADOPTED).order_by("decided_at", "pk")
    if team is not None:
        rows = rows.filter(team=team)
    return {(f.orchestrator_id, f.object_id): f for f in rows}


def _plain_values(data: dict[str, Any] | None) -> str:
    if not data:
        return "—"
    return ", ".join(f"{k}={'—' if v is None else v}" for k, v in data.items())


@dataclass(frozen=True)
class GovernanceReach:
    """Where governance takes effect now, for the pages that say so: the last finished round, the orchestrators
    it writes to (Slurm and Kubernetes), those it only observes (Ray) and those it leaves alone (the demo's
    simulated ones, disabled ones): a round may run every 30 s and reach no cluster at all."""

    last_round_at: datetime | None
    enforced_on: tuple[str, ...]
    observed_on: tuple[str, ...]
    not_governed: tuple[str, ...]  # "name (why)"

    def enforces(self, orchestrator: str = "") -> bool:
        """Whether a change pinned to ``orchestrator`` (or a fleet-wide one) is written to some cluster."""
        return orchestrator in self.enforced_on if orchestrator else bool(self.enforced_on)

    def where(self, orchestrator: str = "") -> str:
        """Where a change (a grant pinned to ``orchestrator``, or a fleet-wide one) is written, in words."""
        if orchestrator and not self.enforces(orchestrator):
            return f"{orchestrator} is not governed: the portal writes it nowhere" + self._left_alone()
        targets = (orchestrator,) if orchestrator else self.enforced_on
        if not targets:
            return "no orchestrator is governed: the portal writes it to no cluster" + self._left_alone()
        observed = f"; {_names(self.observed_on)} only observed (Ray has no per-team quota)" if self.observed_on else ""
        return f"written to {_names(targets)} at the next governance round{observed}"

    def _left_alone(self) -> str:
        return f" ({', '.join(self.not_governed)})" if self.not_governed else ""


def _names(names: tuple[str, ...]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def governance_reach() -> GovernanceReach:
    """Two queries: the last finished round, and every orchestrator that schedules jobs (governed: the rule of
    ``Orchestrator.objects.governed``, enabled and not the demo's, read from the same rows)."""
    last = (
        EnforcementRun.objects.filter(dry_run=False, finished_at__isnull=False)
        .order_by("-started_at")
        .values_list("started_at", flat=True)
        .first()
    )
    enforced: list[str] = []
    observed: list[str] = []
    alone: list[str] = []
    schedulers = Orchestrator.objects.filter(kind__in=Orchestrator.SCHEDULER_KINDS).order_by("name")
    for name, kind, enabled, endpoint in schedulers.values_list("name", "kind", "enabled", "endpoint"):
        if not enabled or endpoint.startswith(DEMO_PREFIX):
            alone.append(f"{name}: {'disabled' if not enabled else DEMO_CLUSTER}")
        elif kind == Orchestrator.Kind.RAY:
            observed.append(name)
        else:
            enforced.append(name)
    return GovernanceReach(last, tuple(enforced), tuple(observed), tuple(alone))


def team_enforcement(team: Team) -> list[OrchestratorEnforcement]:
    """Per governed orchestrator, the team's native objects: intent, what the cluster holds, and a state that
    says "enforced" only where the last round read the object back equal to the portal's intent."""
    views = _round_views()
    orchestrators = Orchestrator.objects.filter(pk__in=views.keys()).order_by("name")
    applied = _by_orchestrator(AppliedObject.objects.filter(team=team.slug))
    drifts = _by_orchestrator(DriftFinding.objects.filter(team=team.slug, state=DriftFinding.State.OPEN))
    plans = _by_orchestrator(EnforcementPlan.objects.filter(state__in=WAITING).order_by("created_at"))
    adopted = _adopted_findings(team.slug)
    rows = []
    for orchestrator in orchestrators:
        view = views[orchestrator.pk]
        ray = orchestrator.kind == Orchestrator.Kind.RAY
        row = OrchestratorEnforcement(
            orchestrator.name,
            orchestrator.kind,
            view.latest.mode,
            view.latest.run.started_at,
            view.latest.error,
            ray,
            note=RAY_NOTE if ray else "",
            read_back_at=view.read.run.started_at if view.read is not None else None,
            read_back=view.latest.read_back,
        )
        if not ray:
            row.objects = _objects(
                applied.get(orchestrator.pk, []),
                drifts.get(orchestrator.pk, []),
                [e for p in plans.get(orchestrator.pk, []) for e in p.changes if e.get("team") == team.slug],
                view,
                {oid: f for (pk, oid), f in adopted.items() if pk == orchestrator.pk},
                team.slug,
            )
        rows.append(row)
    return rows


def _by_orchestrator(rows) -> dict[int, list]:
    grouped: dict[int, list] = {}
    for row in rows:
        grouped.setdefault(row.orchestrator_id, []).append(row)
    return grouped


def _objects(
    applied: list[AppliedObject],
    drifts: list[DriftFinding],
    waiting: list[dict],
    view: RoundView,
    adopted: dict[str, DriftFinding],
    team: str,
) -> list[EnforcedObject]:
    found = {a.object_id: _applied_object(a, view, adopted.get(a.object_id)) for a in applied}
    teams = view.teams()
    for failed in sorted(view.listed("failed") - set(found)):
        if teams.get(failed) == team:  # never written: the portal wants it, the cluster lacks it or differs
            found[failed] = EnforcedObject(failed, failed.split(":", 1)[0], None, None, state="failed")
            found[failed].note = "the write failed at the last round; retried next round"
    for entry in waiting:
        obj = found.get(entry["id"])
        kind = (entry.get("desired") or entry.get("observed") or {}).get("kind", "")
        if obj is None:
            obj = found[entry["id"]] = EnforcedObject(entry["id"], kind, None, _settings(entry.get("observed")))
        obj.intent, obj.pending, obj.state = _settings(entry.get("desired")), True, "pending"
        obj.note = "waits for an approved plan" if entry.get("desired") is not None else "to be removed"
    for finding in drifts:
        obj = found.get(finding.object_id)
        if obj is None:
            obj = found[finding.object_id] = EnforcedObject(
                finding.object_id, finding.applied.get("kind", ""), None, None
            )
        obj.intent = _settings(finding.desired)
        obj.enforced, obj.drift, obj.state = _settings(finding.observed), True, "drift"
        obj.note = "changed on the cluster by hand; an admin reverts or adopts it"
    return sorted(found.values(), key=lambda o: (o.kind, o.object_id))


def _applied_object(row: AppliedObject, view: RoundView, adopted: DriftFinding | None) -> EnforcedObject:
    """An object the portal applied (or found as it wants it, or an admin adopted as the cluster holds it)."""
    held = _settings(row.settings)
    obj = EnforcedObject(row.object_id, row.kind, held, held, state=view.state_of(row.object_id))
    if obj.state == "adopted" and adopted is not None:
        obj.intent = _settings(adopted.desired)
        keys = [k for k in (obj.intent or {}) if (held or {}).get(k) != (obj.intent or {}).get(k)] or list(held or {})
        cluster = {k: (held or {}).get(k) for k in keys}
        portal = {k: (obj.intent or {}).get(k) for k in keys}
        obj.note = f"adopted: cluster holds {_plain_values(cluster)}, portal wants {_plain_values(portal)}"
    elif obj.state == "adopted":
        obj.state = "enforced" if view.latest.read_back else "unverified"
    elif obj.state == "applied":
        obj.note = "written at the last round; read back by the next one"
    elif obj.state == "unverified" and view.read is not None:
        when = f"{view.read.run.started_at:%Y-%m-%d %H:%M} UTC"
        obj.note = f"held when last read back ({when}); the last round could not read the cluster"
    return obj


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
    status: str  # one of STATES, or "" (nothing applied yet)
    enforced: str  # e.g. "Fairshare 4000 · GrpTRES gres/gpu=48", "weight 2000 · capability 12 GPUs"


SHARE_OBJECTS = ("slurm_account", "volcano_queue")  # the objects that carry a team's weight and cap


def share_enforcement() -> tuple[dict[str, list[ShareEnforcement]], list[str]]:
    """Per team slug, each governed Slurm and Kubernetes orchestrator's hold of its share as of the last round
    (one failed write fails its team, not every team there); and the Ray orchestrators, whose enforcement is
    pool-level only. A few queries, whatever the team count."""
    views = _round_views()
    orchestrators = list(Orchestrator.objects.filter(pk__in=views.keys()).order_by("name"))
    applied = {
        (a.orchestrator_id, a.team): a for a in AppliedObject.objects.filter(kind__in=SHARE_OBJECTS).exclude(team="")
    }
    drifting = set(DriftFinding.objects.filter(state=DriftFinding.State.OPEN).values_list("orchestrator_id", "team"))
    waiting = {
        (plan.orchestrator_id, entry.get("team"))
        for plan in EnforcementPlan.objects.filter(state__in=WAITING)
        for entry in plan.changes
    }
    adopted = _adopted_findings()
    found: dict[str, list[ShareEnforcement]] = {}
    for slug in Team.objects.order_by("slug").values_list("slug", flat=True):
        for o in orchestrators:
            if o.kind == Orchestrator.Kind.RAY:
                continue
            row, key = applied.get((o.pk, slug)), (o.pk, slug)
            status = (
                "drift" if key in drifting
                else "pending" if key in waiting
                else _share_state(views[o.pk], slug, row)
            )  # fmt: skip
            text = _share_text(row)
            finding = adopted.get((o.pk, row.object_id)) if row is not None else None
            if status == "adopted" and finding is not None:
                text = f"adopted: cluster holds {text}, portal wants {_share_text_of(row.kind, finding.desired)}"
            found.setdefault(slug, []).append(ShareEnforcement(o.name, status, text))
    return found, [o.name for o in orchestrators if o.kind == Orchestrator.Kind.RAY]


def _share_state(view: RoundView, team: str, row: AppliedObject | None) -> str:
    """The worst state among the team's share objects on one orchestrator, from the last rounds' lists."""
    teams = view.teams()
    mine = {oid for oid, slug in teams.items() if slug == team and oid.split(":", 1)[0] in SHARE_OBJECTS}
    states = {name for name in ("failed", "adopted", "applied") if mine & view.listed(name)}
    if row is not None:
        states.add(view.state_of(row.object_id))
    return next((s for s in STATES if s in states), "")


def _share_text(row: AppliedObject | None) -> str:
    if row is None:
        return "not applied yet"
    return _share_text_of(row.kind, row.settings)


def _share_text_of(kind: str, settings: dict[str, Any] | None) -> str:
    settings = settings or {}
    if kind == "slurm_account":
        caps = " ".join(f"{name}={count}" for name, count in settings.get("grp_tres") or ())
        return f"Fairshare {settings.get('fairshare')}" + (f" · GrpTRES {caps}" if caps else "")
    capability = settings.get("capability_gpus")
    cap = "uncapped" if capability is None else f"capability {capability} GPUs"
    return f"weight {settings.get('weight')} · guarantee {settings.get('guarantee_gpus')} · {cap}"
