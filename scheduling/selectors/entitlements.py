"""Each team's entitlement, read once for everyone who asks "may this team run GPU work, and how much": the
admission webhook, the quota page's standing, the workloads' wait explanations and governance (which splits
the same queues and grants per orchestrator). The rule itself is the engine's
(``engine.governance_state.fleet_entitlements``): queues, any-model or per GPU model, plus active grants,
inherited from the parent by a team with neither."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from scheduling.engine.governance_state import FleetEntitlement, GovernanceInput, GovGrant, GovQueue, GovTeam
from scheduling.engine.governance_state import fleet_entitlements as rule
from scheduling.models import Queue, QuotaGrant, Team

ENDED = (QuotaGrant.State.REVOKED, QuotaGrant.State.EXPIRED)


def queues(slugs: dict[int, str]) -> tuple[GovQueue, ...]:
    return tuple(
        GovQueue(slugs[team_id], float(weight), guaranteed, burst, model)
        for team_id, model, weight, guaranteed, burst in Queue.objects.values_list(
            "team_id", "gpu_model", "weight", "guaranteed", "burst_limit"
        )
    )


def grants(slugs: dict[int, str], at: datetime) -> tuple[GovGrant, ...]:
    """Grants not over by ``at`` (approved or active; revoked and expired ones flagged so)."""
    rows = QuotaGrant.objects.filter(ends_at__gt=at).values_list(
        "team_id", "gpus", "starts_at", "ends_at", "gpu_model", "orchestrator__name", "state"
    )
    return tuple(
        GovGrant(slugs[t], gpus, s.timestamp(), e.timestamp(), model, orch or "", state in ENDED)
        for t, gpus, s, e, model, orch, state in rows
    )


def team_entitlements(at: datetime, teams: Iterable[Team] | None = None) -> dict[str, FleetEntitlement]:
    """Per team slug, its fleet-wide entitlement at ``at`` (``teams``: every team, when already read)."""
    if teams is None:
        rows = list(Team.objects.values_list("pk", "slug", "parent_id"))
    else:
        rows = [(team.pk, team.slug, team.parent_id) for team in teams]
    slugs = {pk: slug for pk, slug, _parent in rows}
    tree = tuple(GovTeam(slug, slugs.get(parent) if parent else None) for _pk, slug, parent in rows)
    return rule(GovernanceInput(tree, queues(slugs), grants(slugs, at)), at.timestamp())


def next_change(at: datetime) -> datetime | None:
    """The next moment a grant starts or ends after ``at``: entitlements read before it may be reused until then."""
    starts = QuotaGrant.objects.filter(starts_at__gt=at).order_by("starts_at").values_list("starts_at", flat=True)
    ends = QuotaGrant.objects.filter(ends_at__gt=at).order_by("ends_at").values_list("ends_at", flat=True)
    moments = [m for m in (starts.first(), ends.first()) if m is not None]
    return min(moments) if moments else None
