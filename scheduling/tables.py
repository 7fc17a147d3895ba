"""One django-tables2 Table per model (or per page row type), sortable on the server."""

import django_tables2 as tables
from django.template.defaultfilters import date as date_filter
from django.urls import reverse
from django.utils.html import format_html
from django_tables2 import utils as tables_utils

from scheduling.models import CapacityReport, LedgerFinding, QuotaGrant, QuotaRequest, Workload
from scheduling.selectors.audit_log import KINDS, action_label
from scheduling.templatetags.durations import duration

ATTRS = {"class": "grid"}

_read_signature = tables_utils.signature
_SIGNATURES: dict[tuple[object, bool], tuple[tuple[str, ...], str | None]] = {}
_SIGNATURES_KEPT = 2048  # functions made per request (a lambda in a view) must not grow it for ever


def _signature(fn) -> tuple[tuple[str, ...], str | None]:
    """django-tables2 reads ``inspect.signature`` of a cell's render method for every cell it draws (a tenth of a
    50-row table's CPU); a function's signature does not change, so it is read once per function (and per
    bound or not: binding drops ``self``). Same answer as django-tables2's own ``signature``."""
    key = (getattr(fn, "__func__", fn), getattr(fn, "__self__", None) is not None)
    try:
        found = _SIGNATURES.get(key)
    except TypeError:  # an unhashable callable
        return _read_signature(fn)
    if found is None:
        if len(_SIGNATURES) >= _SIGNATURES_KEPT:
            _SIGNATURES.clear()
        found = _SIGNATURES[key] = _read_signature(fn)
    return found


tables_utils.signature = _signature  # call_with_appropriate looks it up in its module at each call


class DateTimeColumn(tables.DateTimeColumn):
    """django-tables2's DateTimeColumn, same output, but rendered with the ``date`` filter directly: the
    original compiles its one-line template again for every cell (a fifth of a table page's CPU)."""

    def __init__(self, format=None, short=True, **kwargs):
        super().__init__(format=format, short=short, **kwargs)
        self.date_format = format or ("SHORT_DATETIME_FORMAT" if short else "DATETIME_FORMAT")

    def render(self, value, **kwargs):
        # A TemplateColumn renders empty values too, so a column with no default showed "None" (a report's
        # "Sent" before it was sent): an empty cell reads "—" unless the column says what it means.
        return date_filter(value, self.date_format) or (self.default if self.default is not None else "—")


class TeamTable(tables.Table):
    """Rows are ``teams.TeamNow`` plus a ``parent`` slug; every number counts the whole subtree."""

    name = tables.Column(verbose_name="Team", order_by=("slug",))
    parent = tables.Column(verbose_name="Parent", empty_values=())
    weight = tables.Column(verbose_name="Weight %")
    guaranteed = tables.Column(verbose_name="Guaranteed GPUs")
    burst_limit = tables.Column(verbose_name="Burst limit GPUs")
    allocated = tables.Column(verbose_name="Allocated GPUs")
    pending = tables.Column(verbose_name="Pending GPUs")
    standing = tables.Column(verbose_name="Standing", empty_values=(), orderable=False)

    class Meta:
        attrs = ATTRS
        empty_text = "No teams match."

    def render_name(self, value, record):
        indent = "\u2003" * record.depth
        url = reverse("team-detail", args=[record.slug])
        return format_html('{}<a href="{}">{}</a>', indent, url, value)

    def render_weight(self, value):
        return f"{value:g} %"

    def render_standing(self, record):
        if record.allocated > record.guaranteed:
            borrowed = record.allocated - record.guaranteed
            return format_html('<span class="badge {}">borrowing {} GPUs</span>', "warn", borrowed)
        if record.pending:
            return format_html('<span class="badge {}">{}</span>', "info", "waiting")
        return format_html('<span class="badge {}">{}</span>', "ok", "within guarantee")


class WorkloadTable(tables.Table):
    external_id = tables.Column(verbose_name="Workload")
    submitted_at = DateTimeColumn(format="Y-m-d H:i", verbose_name="Submitted (UTC)")
    orchestrator = tables.Column(accessor="orchestrator__name", verbose_name="Orchestrator")
    gpus = tables.Column(verbose_name="GPUs", empty_values=(), order_by=("gang_size", "gpus_per_member"))
    pending_reason = tables.Column(verbose_name="Why pending")

    class Meta:
        model = Workload
        attrs = ATTRS
        fields = ("external_id", "user", "kind", "orchestrator", "gpus", "priority", "submitted_at", "pending_reason")
        empty_text = "Nothing is waiting."
        order_by = ("-submitted_at",)

    def render_gpus(self, record):
        if record.gang_size > 1:
            return f"{record.gpus} ({record.gang_size}×{record.gpus_per_member})"
        return record.gpus

    def render_pending_reason(self, value):
        return value or "waiting for its turn in the queue"


WIDE_ONLY = {"th": {"class": "wide-only"}, "td": {"class": "wide-only"}}


class QuotaRequestTable(tables.Table):
    id = tables.Column(verbose_name="#", linkify=("quota-detail", {"pk": tables.A("pk")}))
    team = tables.Column(accessor="team__name", verbose_name="Team")
    # On a phone the secondary columns step aside (portal.css: .wide-only) so Period and State stay on screen.
    requester = tables.Column(accessor="requester__username", verbose_name="Requested by", attrs=WIDE_ONLY)
    gpus = tables.Column(verbose_name="GPUs", empty_values=())
    period = tables.Column(verbose_name="Period", empty_values=(), order_by=("starts_at",))
    state = tables.Column(verbose_name="State")
    created_at = DateTimeColumn(format="Y-m-d H:i", verbose_name="Created (UTC)", attrs=WIDE_ONLY)

    class Meta:
        model = QuotaRequest
        attrs = ATTRS
        fields = ("id", "team", "period", "state", "gpus", "requester", "created_at")
        empty_text = "No quota requests."
        order_by = ("-created_at",)

    def render_gpus(self, record):
        where = record.orchestrator.name if record.orchestrator_id else "any orchestrator"
        return f"{record.gpus} {record.gpu_model or 'any model'} · {where}"

    def render_period(self, record):
        # Each end on its own line: the column stays narrow enough for a phone.
        return format_html(
            '<span class="nowrap">{} →</span> <span class="nowrap">{}</span>',
            f"{record.starts_at:%Y-%m-%d %H:%M}",
            f"{record.ends_at:%Y-%m-%d %H:%M}",
        )

    def value_period(self, record):
        return f"{record.starts_at:%Y-%m-%d %H:%M} → {record.ends_at:%Y-%m-%d %H:%M}"

    def render_state(self, value, record):
        tone = {"approved": "ok", "active": "ok", "denied": "bad", "revoked": "bad", "submitted": "warn"}
        return format_html('<span class="badge {}">{}</span>', tone.get(record.state, "info"), value)


class QuotaGrantTable(tables.Table):
    request = tables.Column(verbose_name="Request", linkify=("quota-detail", {"pk": tables.A("request_id")}))
    team = tables.Column(accessor="team__name", verbose_name="Team")
    gpus = tables.Column(verbose_name="GPUs", empty_values=())
    starts_at = DateTimeColumn(format="Y-m-d H:i", verbose_name="Starts (UTC)")
    ends_at = DateTimeColumn(format="Y-m-d H:i", verbose_name="Ends (UTC)")

    class Meta:
        model = QuotaGrant
        attrs = ATTRS
        fields = ("request", "team", "gpus", "starts_at", "ends_at", "state")
        empty_text = "No quota grants."
        order_by = ("-starts_at",)

    def render_request(self, record):
        return f"#{record.request_id}"

    def render_gpus(self, record):
        return f"+{record.gpus} {record.gpu_model or 'any model'}"


class CapacityReportTable(tables.Table):
    period_start = DateTimeColumn(
        format="D Y-m-d", verbose_name="Week of", linkify=("report-detail", {"pk": tables.A("pk")})
    )
    status = tables.Column(verbose_name="Status")
    generated_at = DateTimeColumn(format="Y-m-d H:i", verbose_name="Generated")
    sent_at = DateTimeColumn(format="Y-m-d H:i", verbose_name="Sent", default="not sent")
    recipients = tables.Column(verbose_name="Recipients")
    downloads = tables.Column(verbose_name="Download", empty_values=(), orderable=False)

    class Meta:
        model = CapacityReport
        attrs = ATTRS
        fields = ("period_start", "status", "generated_at", "sent_at", "recipients", "downloads")
        empty_text = "No report yet: the first is built on Monday 07:00 for the week before."
        order_by = ("-period_start",)

    def render_status(self, value, record):
        tone = {
            "sent": "ok",
            "ready": "info",
            "failed": "bad",
            "sending": "warn",
            "generating": "warn",
            "no_data": "warn",
        }
        badge = format_html('<span class="badge {}">{}</span>', tone.get(record.status, "info"), value)
        if not record.error:
            return badge
        return format_html('{}<br><span class="muted small report-error">{}</span>', badge, record.error)

    def render_downloads(self, record):
        if not record.generated_at:
            return "—"
        links = [(fmt.upper(), reverse("report-download", args=[record.pk, fmt])) for fmt in ("html", "pdf", "csv")]
        return format_html(
            " · ".join(['<a href="{}">{}</a>'] * len(links)), *[part for label, url in links for part in (url, label)]
        )


SEVERITY_BADGES = {"high": "bad", "medium": "warn", "low": "info"}


class LedgerFindingTable(tables.Table):
    """Ledger findings, most recent first; the explanation says what to do."""

    severity = tables.Column(verbose_name="Severity")
    kind = tables.Column(verbose_name="Finding")
    node = tables.Column(verbose_name="Node")
    orchestrators = tables.Column(verbose_name="Orchestrators")
    opened_at = DateTimeColumn(format="Y-m-d H:i", verbose_name="Opened (UTC)")
    last_seen = DateTimeColumn(format="Y-m-d H:i:s", verbose_name="Last seen (UTC)")
    closed_at = DateTimeColumn(format="Y-m-d H:i", verbose_name="Closed (UTC)")
    explanation = tables.Column(verbose_name="Explanation", orderable=False)

    class Meta:
        model = LedgerFinding
        attrs = ATTRS
        fields = ("severity", "kind", "node", "orchestrators", "opened_at", "last_seen", "closed_at", "explanation")
        empty_text = "No drift: every node has exactly one owner."
        order_by = ("-opened_at",)

    def render_severity(self, value, record):
        return format_html('<span class="badge {}">{}</span>', SEVERITY_BADGES.get(record.severity, "info"), value)

    def render_orchestrators(self, record):
        return ", ".join(record.orchestrator_names)


class HoursColumn(tables.Column):
    def render(self, value):
        return f"{value:,.1f}"


class WaitColumn(tables.Column):
    """A wait in words ("2 h 5 min"); "—" when there is none (nothing started)."""

    def __init__(self, **kwargs):
        super().__init__(empty_values=(), **kwargs)

    def render(self, value):
        return duration(value)


class NextLevelColumn(tables.Column):
    """The cell links the drill-down's next level: the table's ``link(row)``, None for no link."""

    def render(self, value, record, table):
        url = table.link(record)
        return format_html('<a href="{}">{}</a>', url, value) if url else value


class _DrillDownTable(tables.Table):
    """A level of the utilisation drill-down: rows are dataclasses from ``selectors.drilldown``; ``link`` maps
    a row to the next level's URL (None: the reader may not go further)."""

    def __init__(self, data, *, link, **kwargs):
        super().__init__(data, **kwargs)
        self.link = link


class UserUsageTable(_DrillDownTable):
    """A team's GPU-hours per user in a window (``drilldown.UserUsage``)."""

    user = NextLevelColumn(verbose_name="User")
    gpu_hours = HoursColumn(verbose_name="GPU-hours")
    jobs = tables.Column(verbose_name="Jobs run")
    mean_wait_s = WaitColumn(verbose_name="Mean wait")
    p95_wait_s = WaitColumn(verbose_name="p95 wait")
    share_pct = tables.Column(verbose_name="Share of the team")

    class Meta:
        attrs = {**ATTRS, "id": "user-usage"}
        empty_text = "Nobody in this team ran or waited for GPUs in this window."
        order_by = ("-gpu_hours",)

    def render_share_pct(self, value):
        return f"{value:.1f} %"


class JobInWindowTable(_DrillDownTable):
    """A user's jobs in a window (``drilldown.JobInWindow``): GPU-hours are the part inside the window; a job
    that did not start shows no wait."""

    external_id = NextLevelColumn(verbose_name="Job")
    orchestrator = tables.Column(verbose_name="Orchestrator")
    team = tables.Column(verbose_name="Team", attrs=WIDE_ONLY)
    gpus = tables.Column(verbose_name="GPUs")
    started_at = DateTimeColumn(format="Y-m-d H:i", verbose_name="Start (UTC)")
    finished_at = DateTimeColumn(format="Y-m-d H:i", verbose_name="End (UTC)", attrs=WIDE_ONLY)
    gpu_hours = HoursColumn(verbose_name="GPU-hours in window")
    wait_s = WaitColumn(verbose_name="Wait")
    state = tables.Column(verbose_name="State")

    class Meta:
        attrs = {**ATTRS, "id": "user-jobs"}
        empty_text = "No jobs of this user in this window."
        order_by = ("-started_at",)


class ReclaimPlanTable(tables.Table):
    """Rows are ``selectors.reclaim.PlanRow`` (decided, applied, superseded or native plans), already narrowed
    and redacted for the reader."""

    created_at = DateTimeColumn(accessor="plan__created_at", format="Y-m-d H:i", verbose_name="Planned (UTC)")
    orchestrator = tables.Column(accessor="plan__orchestrator__name", verbose_name="Orchestrator")
    owners = tables.Column(verbose_name="For (below guarantee)", orderable=False)
    gpus = tables.Column(verbose_name="GPUs taken back", orderable=False)
    mode = tables.Column(accessor="plan__mode", verbose_name="Mode")
    state = tables.Column(accessor="plan__state", verbose_name="Outcome")
    decided = tables.Column(accessor="plan__reason", verbose_name="Decided", empty_values=(), orderable=False)

    class Meta:
        attrs = ATTRS
        empty_text = "No reclaim plan has been decided yet."

    def render_gpus(self, value):
        return f"{value:g}"

    def render_state(self, value, record):
        tone = {"applied": "ok", "approved": "ok", "rejected": "bad", "failed": "bad"}.get(value, "info")
        badge = format_html('<span class="badge {}">{}</span>', tone, record.plan.get_state_display())
        return format_html("{}<br><span class=\"small muted\">{}</span>", badge, _what_was_done(record.plan.actions))

    def render_decided(self, record):
        plan = record.plan
        who = plan.decided_by.get_username() if plan.decided_by else ("the round" if plan.decided_at else "—")
        when = date_filter(plan.decided_at, "Y-m-d H:i") if plan.decided_at else ""
        return format_html('{} <span class="muted small">{}</span><br><span class="small">{}</span>', who, when,
                           plan.reason or plan.error)


def _what_was_done(actions: list[dict]) -> str:
    """"requeue 4101 (dry run)", "skip": the levers a plan pulled, as its actions recorded them; native reclaim's
    QOS writes on Slurm counted, not listed ("3 QOS writes")."""
    pulled = [a for a in actions or () if a.get("verb") != "qos"]
    done = [f"{a.get('verb', '')} {a.get('victim', '')}".strip() + (" (dry run)" if a.get("dry_run") else "")
            for a in pulled]
    writes = len(actions or ()) - len(pulled)
    return "; ".join(([f"{writes} QOS write{'s' if writes != 1 else ''}"] if writes else []) + done)


class AuditLogTable(tables.Table):
    """Rows are ``selectors.audit_log.decisions`` value rows (newest first, ordered by the selector: a union of
    ten record kinds sorts in SQL only by its own columns)."""

    when = DateTimeColumn(format="Y-m-d H:i:s", verbose_name="When (UTC)", orderable=False)
    what = tables.Column(verbose_name="Decision", orderable=False)
    object_pk = tables.Column(verbose_name="Object", orderable=False)
    team_slug = tables.Column(verbose_name="Team", orderable=False)
    by_user = tables.Column(verbose_name="By", orderable=False)
    did = tables.Column(verbose_name="Action", orderable=False)
    why = tables.Column(verbose_name="Why", orderable=False)

    class Meta:
        attrs = {**ATTRS, "id": "audit-log"}
        empty_text = "No decisions match."
        row_attrs = {"data-kind": lambda record: record["what"]}

    def __init__(self, *args, user=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.user = user

    def render_what(self, value):
        return KINDS.get(value, value)

    value_what = render_what

    def render_object_pk(self, value, record):
        url = _audit_object_url(record["what"], value)
        return format_html('<a href="{}">#{}</a>', url, value) if url else f"#{value}"

    def value_object_pk(self, value):
        return value

    def render_team_slug(self, value):
        return format_html('<a href="{}">{}</a>', reverse("team-detail", args=[value]), value) if value else "—"

    def value_team_slug(self, value):
        return value

    def render_by_user(self, value):
        return value or "the portal"

    value_by_user = render_by_user

    def render_did(self, value, record):
        return action_label(record)

    value_did = render_did

    def render_why(self, value):
        return value or "—"

    def value_why(self, value):
        return value


def _audit_object_url(kind: str, pk: int) -> str:
    """Where one audited object is shown, for the kinds that have a page of their own."""
    names = {"quota-request": "quota-detail", "rebalance-plan": "rebalance-plan", "pool-policy": "rebalance-policy"}
    if kind in names:
        return reverse(names[kind], args=[pk])
    pages = {
        "reclaim-plan": "reclaim", "drift": "governance", "enforcement-plan": "governance",
        "chat-webhook": "chat-webhooks",
    }
    return reverse(pages[kind]) if kind in pages else ""


class FigureColumn(tables.Column):
    """A figure that may be missing (not measured): rounded for the page, more digits and no unit in the CSV."""

    def __init__(self, *, shown="{:,.1f}", exported="{:.3f}", missing="—", **kwargs):
        super().__init__(empty_values=(), **kwargs)
        self.shown, self.exported, self.missing = shown, exported, missing

    def render(self, value):
        return self.missing if value is None else self.shown.format(value)

    def value(self, value):
        return "" if value is None else self.exported.format(value)


class FinishedWorkloadTable(tables.Table):
    """Rows are ``selectors.finished_jobs.finished_workloads`` (figures annotated in SQL, so every column sorts)."""

    external_id = tables.Column(verbose_name="Job", linkify=("workload-detail", {"pk": tables.A("pk")}))
    team = tables.Column(accessor="team__slug", verbose_name="Team")
    user = tables.Column(verbose_name="User")
    orchestrator = tables.Column(accessor="orchestrator__name", verbose_name="Orchestrator", attrs=WIDE_ONLY)
    gpu_count = tables.Column(verbose_name="GPUs")
    gpu_hours = FigureColumn(verbose_name="GPU-hours")
    wait_s = WaitColumn(verbose_name="Wait")
    busy_pct = FigureColumn(verbose_name="GPU busy", shown="{:.0f} %", exported="{:.1f}", missing="not measured")
    idle_gpu_hours = FigureColumn(verbose_name="Idle GPU-hours", attrs=WIDE_ONLY)
    state = tables.Column(verbose_name="State")
    finished_at = DateTimeColumn(format="Y-m-d H:i", verbose_name="Ended (UTC)")

    class Meta:
        attrs = {**ATTRS, "id": "finished-jobs"}
        empty_text = "No finished jobs match."
        order_by = ("-finished_at",)
        row_attrs = {"id": lambda record: f"finished-{record.pk}"}

    def render_external_id(self, value, record):
        return f"{record.orchestrator.name}:{value}"

    def render_team(self, value):
        return value or "—"

    def render_user(self, value):
        return value or "—"
