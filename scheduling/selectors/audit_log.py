"""One audit log of every decision, read from the records that already hold them (no copy of the data).

Each kind of decision keeps its own record: the django-simple-history rows of quota requests and grants, queues
(fair-share edits), entitlement shares (a governance round moving a team's share), pool policies, rebalance,
reclaim and enforcement plans and drift findings, each with ``history_user`` (who) and
``history_change_reason`` (why); and the admission webhook's ``AdmissionDecision`` rows. ``decisions`` turns
each into the same columns and reads them as one SQL ``UNION ALL``, newest first, so a page of the log and its
count are two queries however many kinds there are.

Who sees what follows ``selectors/access.py``: admins every row; everyone else the rows of the teams they may
see (their teams and everything below them: a lead's led teams and below, a researcher's own teams). Decisions
that belong to no team (pool policies, rebalance, reclaim and enforcement plans, which move the whole fleet) are
read by admins only, like the pages that make them.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.db.models import CharField, DateTimeField, F, IntegerField, QuerySet, Value
from django.db.models.functions import Cast, Coalesce, Concat

from scheduling import models
from scheduling.selectors.access import team_ids_visible_to

COLUMNS = ("when", "what", "object_pk", "team_slug", "by_user", "did", "why")  # no model field has these names
HISTORY_ACTIONS = {"+": "created", "~": "changed", "-": "deleted"}


@dataclass(frozen=True)
class Source:
    """One kind of decision: its label, where its rows are, how to name the team, the action and the reason."""

    kind: str
    label: str
    rows: object  # a callable returning the base queryset (history managers exist only once apps are ready)
    team: F | Value | None  # the team's slug as an expression; None: the decision belongs to no team
    team_id_field: str | None = "team_id"
    state_field: str | None = "state"


def _history(model) -> object:
    return lambda: model.history.all()


SOURCES: tuple[Source, ...] = (
    Source("quota-request", "Quota request", _history(models.QuotaRequest), F("team__slug")),
    Source("quota-grant", "Quota grant", _history(models.QuotaGrant), F("team__slug")),
    Source("queue", "Fair-share queue", _history(models.Queue), F("team__slug"), state_field=None),
    Source("share", "Governance share", _history(models.EntitlementShare), F("team__slug"), state_field=None),
    Source("drift", "Drift finding", _history(models.DriftFinding), F("team"), team_id_field=None),
    Source("pool-policy", "Pool policy", _history(models.PoolPolicy), None, state_field=None),
    Source("rebalance-plan", "Rebalance plan", _history(models.RebalancePlan), None),
    Source("reclaim-plan", "Reclaim plan", _history(models.ReclaimPlan), None),
    Source("enforcement-plan", "Governance plan", _history(models.EnforcementPlan), None),
    Source("chat-webhook", "Chat webhook", _history(models.ChatWebhook), None, state_field=None),
    Source("job-action", "Job action", _history(models.JobAction), F("team__slug")),
    Source("admission", "Admission decision", lambda: models.AdmissionDecision.objects.all(), F("team__slug")),
)
KINDS = {source.kind: source.label for source in SOURCES}


@dataclass(frozen=True)
class AuditFilter:
    """What the log is narrowed to; blank or None means any."""

    team: models.Team | None = None
    actor: str = ""
    kind: str = ""
    since: datetime | None = None
    until: datetime | None = None


def decisions(user, wanted: AuditFilter | None = None) -> QuerySet:
    """The decisions ``user`` may read that match ``wanted``: one ``UNION ALL`` of value rows (``COLUMNS``),
    newest first. An empty union when no kind is left (a kind nobody may read, a team outside one's view)."""
    wanted = wanted or AuditFilter()
    visible = team_ids_visible_to(user)
    parts = [_rows(source, visible, wanted) for source in SOURCES if not wanted.kind or wanted.kind == source.kind]
    parts = [part for part in parts if part is not None]
    if not parts:
        return models.QuotaRequest.history.none().order_by().annotate(**_columns(SOURCES[0])).values(*COLUMNS)
    first, *rest = parts
    return first.union(*rest, all=True).order_by("-when", "what", "-object_pk")


def _rows(source: Source, visible: set[int] | None, wanted: AuditFilter) -> QuerySet | None:
    """One source's rows as the log's columns, narrowed to what the user may see and asked for; None when none
    can match (a team-less kind for a non-admin, or a team asked of a kind that has none)."""
    if source.team is None and (visible is not None or wanted.team is not None):
        return None
    rows = source.rows()
    admission = source.kind == "admission"
    at, actor = ("at", "user") if admission else ("history_date", "history_user__username")
    if visible is not None:
        rows = rows.filter(**_team_filter(source, visible))
    if wanted.team is not None:
        rows = rows.filter(**_team_filter(source, {wanted.team.pk}))
    if wanted.actor:
        rows = rows.filter(**{f"{actor}__icontains": wanted.actor})
    if wanted.since is not None:
        rows = rows.filter(**{f"{at}__gte": wanted.since})
    if wanted.until is not None:
        rows = rows.filter(**{f"{at}__lt": wanted.until})
    return rows.order_by().annotate(**_columns(source)).values(*COLUMNS)


def _team_filter(source: Source, team_ids: set[int]) -> dict:
    if source.team_id_field is not None:
        return {f"{source.team_id_field}__in": team_ids}
    slugs = models.Team.objects.filter(pk__in=team_ids).values("slug")  # drift findings name their team by slug
    return {"team__in": slugs}


def _columns(source: Source) -> dict:
    """The log's columns for one source, in ``COLUMNS`` order (a union pairs columns by position)."""
    text = CharField()
    if source.kind == "admission":
        verdict = Concat(F("kind"), Value(" "), F("namespace"), Value("/"), F("name"), output_field=text)
        return {
            "when": Cast("at", DateTimeField()),
            "what": Value(source.kind, output_field=text),
            "object_pk": Cast("id", IntegerField()),
            "team_slug": Coalesce(source.team, Value(""), output_field=text),
            "by_user": Cast("user", text),
            "did": Cast("allowed", text),
            "why": Concat(verdict, Value(": "), F("message"), output_field=text),
        }
    action = F(source.state_field) if source.state_field else F("history_type")
    return {
        "when": Cast("history_date", DateTimeField()),
        "what": Value(source.kind, output_field=text),
        "object_pk": Cast("id", IntegerField()),
        "team_slug": Coalesce(source.team, Value(""), output_field=text) if source.team is not None
        else Value("", output_field=text),
        "by_user": Coalesce("history_user__username", Value(""), output_field=text),
        "did": Cast(action, text),
        "why": Coalesce("history_change_reason", Value(""), output_field=text),
    }


def action_label(row: dict) -> str:
    """The action in words: an admission's verdict, a state, or what the history row did."""
    if row["what"] == "admission":
        return "allowed" if row["did"] in ("1", "true", "True", "t") else "denied"
    return HISTORY_ACTIONS.get(row["did"], row["did"])
