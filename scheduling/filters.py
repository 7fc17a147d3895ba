"""One django-filter FilterSet per model, shared by the HTML lists and (later) the REST API."""

import django_filters
from django import forms
from django.db.models import Q

from scheduling.models import (
    LedgerFinding,
    Node,
    NodeAlias,
    Orchestrator,
    OwnershipInterval,
    QuotaGrant,
    QuotaRequest,
    Team,
    Workload,
)


class TeamFilter(django_filters.FilterSet):
    q = django_filters.CharFilter(method="search", label="Name or slug contains")
    parent = django_filters.ModelChoiceFilter(queryset=Team.objects.all(), label="Parent team")
    top_level = django_filters.BooleanFilter(field_name="parent", lookup_expr="isnull", label="Top-level only")

    class Meta:
        model = Team
        fields = ["q", "parent", "top_level"]

    def search(self, queryset, name, value):
        return queryset.filter(Q(name__icontains=value) | Q(slug__icontains=value))


class WorkloadFilter(django_filters.FilterSet):
    state = django_filters.ChoiceFilter(choices=Workload.State.choices)
    kind = django_filters.ChoiceFilter(choices=Workload.Kind.choices)
    orchestrator = django_filters.ModelChoiceFilter(queryset=Orchestrator.objects.all())
    user = django_filters.CharFilter(lookup_expr="iexact", label="User")
    min_gpus = django_filters.NumberFilter(method="at_least_gpus", label="At least GPUs")

    class Meta:
        model = Workload
        fields = ["state", "kind", "orchestrator", "user", "min_gpus"]

    def at_least_gpus(self, queryset, name, value):
        from django.db.models import F

        return queryset.alias(total=F("gang_size") * F("gpus_per_member")).filter(total__gte=value)


class QuotaRequestFilter(django_filters.FilterSet):
    state = django_filters.ChoiceFilter(choices=QuotaRequest.State.choices)
    team = django_filters.ModelChoiceFilter(queryset=Team.objects.all())
    gpu_model = django_filters.CharFilter(lookup_expr="iexact", label="GPU model")

    class Meta:
        model = QuotaRequest
        fields = ["state", "team", "gpu_model"]


class QuotaGrantFilter(django_filters.FilterSet):
    state = django_filters.ChoiceFilter(choices=QuotaGrant.State.choices)
    team = django_filters.ModelChoiceFilter(queryset=Team.objects.all())

    class Meta:
        model = QuotaGrant
        fields = ["state", "team", "gpu_model"]


class NodeFilter(django_filters.FilterSet):
    orchestrator = django_filters.ModelChoiceFilter(queryset=Orchestrator.objects.all())
    state = django_filters.ChoiceFilter(choices=Node.State.choices)

    class Meta:
        model = Node
        fields = ["orchestrator", "state", "gpu_model", "leaf_switch", "nvlink_domain"]


class OrchestratorFilter(django_filters.FilterSet):
    kind = django_filters.ChoiceFilter(choices=Orchestrator.Kind.choices)

    class Meta:
        model = Orchestrator
        fields = ["kind", "enabled"]


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


class LedgerFindingFilter(django_filters.FilterSet):
    """Issue 10: the ledger page and /api/v1/ledger/findings/ filter with this one FilterSet."""

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


class OwnershipIntervalFilter(django_filters.FilterSet):
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


class NodeAliasFilter(django_filters.FilterSet):
    orchestrator = django_filters.CharFilter(field_name="orchestrator__name")
    host = django_filters.CharFilter(field_name="host__name")

    class Meta:
        model = NodeAlias
        fields = ["orchestrator", "host", "name"]
