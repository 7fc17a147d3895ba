"""One django-filter FilterSet per model, shared by the HTML lists and the REST API.

Related objects are named as people write them, as NetBox does: a team by its slug, an orchestrator by its
name (``?team=nlp&orchestrator=slurm-a``). A name that matches nothing is a 400 naming the parameter (the
page shows the same error next to the field), never an empty list that looks like an answer.

Visibility is applied by construction, as NetBox's ``restrict()``: every FilterSet here is a
``VisibleFilterSet``, which cannot be built without the request, and every team-valued filter chooses among
``visible_teams(request)`` only. So a dropdown never lists a team the user may not see, and ``?team=<hidden>``
answers exactly as ``?team=<missing>`` does (a 400 "no team is called ..."), never an empty 200 that tells an
outsider the team exists.
"""

import django_filters
from django import forms
from django.core.validators import ProhibitNullCharactersValidator
from django.db.models import F, Q

from scheduling.models import (
    AdmissionDecision,
    CollectorRun,
    LedgerFinding,
    Node,
    NodeAlias,
    Orchestrator,
    OwnershipInterval,
    QuotaGrant,
    QuotaRequest,
    Team,
    UsageRollup,
    UsageSample,
    Workload,
)
from scheduling.selectors import access


class NamedChoiceField(forms.ModelChoiceField):
    """A related object by its slug or name; a NUL is refused before any lookup (PostgreSQL stores none)."""

    def to_python(self, value):
        if isinstance(value, str) and "\x00" in value:
            raise forms.ValidationError(ProhibitNullCharactersValidator.message, code="null_characters_not_allowed")
        return super().to_python(value)


class NamedFilter(django_filters.ModelChoiceFilter):
    """``?team=nlp``: the object whose ``to_field_name`` (slug, name) is the value; unknown is a 400."""

    field_class = NamedChoiceField

    def __init__(self, *args, noun: str, **kwargs):
        kwargs.setdefault("error_messages", {"invalid_choice": f"no {noun} is called %(value)s."})
        super().__init__(*args, **kwargs)


def visible_teams(request):
    """The teams the request's user may see: the only choices of a team-valued filter."""
    if request is None:
        return Team.objects.none()
    return access.only_visible(Team.objects.all(), request.user, "pk")


class VisibleFilterSet(django_filters.FilterSet):
    """A FilterSet that knows whose request it filters: pages pass ``request=request``, DRF's filter backend
    does so itself. Without one, team choices would fall back to every team, so it is refused."""

    def __init__(self, data=None, queryset=None, *, request=None, prefix=None):
        if request is None:
            raise TypeError(f"{type(self).__name__} needs request=: its team choices are the user's visible teams")
        super().__init__(data, queryset, request=request, prefix=prefix)


def team_filter(**kwargs) -> NamedFilter:
    return NamedFilter(queryset=visible_teams, to_field_name="slug", noun="team", label="Team", **kwargs)


def orchestrator_filter(**kwargs) -> NamedFilter:
    return NamedFilter(
        queryset=Orchestrator.objects.all(), to_field_name="name", noun="orchestrator", label="Orchestrator", **kwargs
    )


class TeamFilter(VisibleFilterSet):
    q = django_filters.CharFilter(method="search", label="Name or slug contains")
    parent = django_filters.ModelChoiceFilter(queryset=visible_teams, label="Parent team")
    top_level = django_filters.BooleanFilter(
        field_name="parent",
        lookup_expr="isnull",
        label="Level",
        # Django's null-boolean select offered "Unknown" for "don't filter": say what each choice shows.
        widget=forms.Select(choices=[("", "All teams"), ("true", "Top-level teams"), ("false", "Sub-teams")]),
    )

    class Meta:
        model = Team
        fields = ["q", "parent", "top_level"]

    def search(self, queryset, name, value):
        return queryset.filter(Q(name__icontains=value) | Q(slug__icontains=value))


class RealOffsetIsoDateTimeField(django_filters.fields.IsoDateTimeField):
    """An ISO 8601 time whose UTC offset is one a clock can have (|offset| <= 14 h): Python accepts up to
    24 h, PostgreSQL fails on more than 16 h, which would be a 500 instead of a 400 naming the field."""

    def to_python(self, value):
        parsed = super().to_python(value)
        offset = parsed.utcoffset() if parsed is not None else None
        if offset is not None and abs(offset.total_seconds()) > 14 * 3600:
            raise forms.ValidationError("Enter a time whose UTC offset is within +/-14:00.", code="invalid")
        return parsed


class IsoTimeFilter(django_filters.IsoDateTimeFilter):
    field_class = RealOffsetIsoDateTimeField


class WorkloadFilter(VisibleFilterSet):
    state = django_filters.ChoiceFilter(choices=Workload.State.choices)
    kind = django_filters.ChoiceFilter(choices=Workload.Kind.choices)
    orchestrator = orchestrator_filter()
    team = team_filter()
    user = django_filters.CharFilter(lookup_expr="iexact", label="User")
    min_gpus = django_filters.NumberFilter(method="at_least_gpus", label="At least GPUs")
    submitted_after = IsoTimeFilter(field_name="submitted_at", lookup_expr="gte", label="Submitted from (ISO time)")
    submitted_before = IsoTimeFilter(field_name="submitted_at", lookup_expr="lt", label="Submitted before")

    class Meta:
        model = Workload
        fields = ["state", "kind", "orchestrator", "team", "user", "min_gpus", "submitted_after", "submitted_before"]

    def at_least_gpus(self, queryset, name, value):
        return queryset.alias(total=F("gang_size") * F("gpus_per_member")).filter(total__gte=value)


class QuotaRequestFilter(VisibleFilterSet):
    state = django_filters.ChoiceFilter(choices=QuotaRequest.State.choices)
    team = team_filter()
    gpu_model = django_filters.CharFilter(lookup_expr="iexact", label="GPU model")

    class Meta:
        model = QuotaRequest
        fields = ["state", "team", "gpu_model"]


class QuotaGrantFilter(VisibleFilterSet):
    state = django_filters.ChoiceFilter(choices=QuotaGrant.State.choices)
    team = team_filter()

    class Meta:
        model = QuotaGrant
        fields = ["state", "team", "gpu_model"]


class NodeFilter(VisibleFilterSet):
    orchestrator = orchestrator_filter()
    state = django_filters.ChoiceFilter(choices=Node.State.choices)

    class Meta:
        model = Node
        fields = ["orchestrator", "domain", "name", "gpu_model", "state", "leaf_switch", "nvlink_domain", "pinned"]


class _UsageFilter(VisibleFilterSet):
    orchestrator = orchestrator_filter()
    team = team_filter()
    pool = django_filters.BooleanFilter(field_name="team", lookup_expr="isnull", label="pool rows only (team is null)")


class UsageSampleFilter(_UsageFilter):
    since = IsoTimeFilter(field_name="taken_at", lookup_expr="gte")
    until = IsoTimeFilter(field_name="taken_at", lookup_expr="lt")

    class Meta:
        model = UsageSample
        fields = ["orchestrator", "team"]


class UsageRollupFilter(_UsageFilter):
    since = IsoTimeFilter(field_name="period_start", lookup_expr="gte")
    until = IsoTimeFilter(field_name="period_start", lookup_expr="lt")

    class Meta:
        model = UsageRollup
        fields = ["orchestrator", "team", "resolution"]


class CollectorRunFilter(VisibleFilterSet):
    orchestrator = orchestrator_filter()

    class Meta:
        model = CollectorRun
        fields = ["orchestrator", "ok"]


class AdmissionDecisionFilter(VisibleFilterSet):
    """``/api/v1/admission/decisions/``: the webhook's answers and the collector's "admission bypassed" findings
    (``?bypassed=true``)."""

    team = team_filter()
    pool = django_filters.CharFilter(label="Pool (orchestrator name)")
    namespace = django_filters.CharFilter()
    since = IsoTimeFilter(field_name="at", lookup_expr="gte", label="At or after (ISO time)")

    class Meta:
        model = AdmissionDecision
        fields = ["bypassed", "allowed", "patched", "team", "pool", "namespace", "scheduler", "since"]


class LedgerFindingFilter(VisibleFilterSet):
    """The ledger page and /api/v1/ledger/findings/ filter with this one FilterSet, so both list the same findings."""

    STATUS = (("open", "Open"), ("closed", "Closed"))

    status = django_filters.ChoiceFilter(choices=STATUS, method="by_status", label="Status")
    kind = django_filters.ChoiceFilter(choices=LedgerFinding.Kind.choices)
    severity = django_filters.ChoiceFilter(choices=LedgerFinding.Severity.choices)
    node = django_filters.CharFilter(lookup_expr="icontains", label="Node contains")
    orchestrator = django_filters.CharFilter(field_name="orchestrators", lookup_expr="icontains", label="Orchestrator")
    since = IsoTimeFilter(method="open_since", label="Open at or after (ISO time)")
    until = IsoTimeFilter(field_name="opened_at", lookup_expr="lt", label="Opened before (ISO time)")

    class Meta:
        model = LedgerFinding
        fields = ["status", "kind", "severity", "node", "orchestrator", "since", "until"]

    def by_status(self, queryset, name, value):
        return queryset.filter(closed_at__isnull=value == "open")

    def open_since(self, queryset, name, value):
        return queryset.filter(Q(closed_at__isnull=True) | Q(closed_at__gte=value))


class OwnershipIntervalFilter(VisibleFilterSet):
    node = django_filters.CharFilter()
    orchestrator = django_filters.CharFilter(field_name="orchestrator__name")
    open = django_filters.BooleanFilter(field_name="ended_at", lookup_expr="isnull", label="Still open")
    since = IsoTimeFilter(method="ending_after", label="Overlapping from (ISO time)")
    until = IsoTimeFilter(field_name="started_at", lookup_expr="lt", label="Started before")

    class Meta:
        model = OwnershipInterval
        fields = ["node", "orchestrator", "open", "since", "until"]

    def ending_after(self, queryset, name, value):
        return queryset.filter(Q(ended_at__isnull=True) | Q(ended_at__gt=value))


class NodeAliasFilter(VisibleFilterSet):
    orchestrator = django_filters.CharFilter(field_name="orchestrator__name")
    host = django_filters.CharFilter(field_name="host__name")

    class Meta:
        model = NodeAlias
        fields = ["orchestrator", "host", "name"]


class FinishedWorkloadFilter(WorkloadFilter):
    """The finished-jobs list (``/workloads/finished/``): the workload filters, a search over the job's ID and
    name, the finished states only, and when it ended."""

    q = django_filters.CharFilter(method="search", label="Job ID or name")
    state = django_filters.ChoiceFilter(
        choices=[(s, label) for s, label in Workload.State.choices if s not in Workload.ACTIVE_STATES]
    )
    user = django_filters.CharFilter(lookup_expr="icontains", label="User")
    finished_after = IsoTimeFilter(field_name="finished_at", lookup_expr="gte", label="Ended from (ISO time)")
    finished_before = IsoTimeFilter(field_name="finished_at", lookup_expr="lt", label="Ended before")

    class Meta:
        model = Workload
        fields = ["q", "team", "user", "orchestrator", "state", "kind", "min_gpus", "finished_after", "finished_before"]

    def search(self, queryset, name, value):
        return queryset.filter(Q(external_id__icontains=value) | Q(name__icontains=value))
