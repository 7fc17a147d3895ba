"""One django-filter FilterSet per model, shared by the HTML lists and (later) the REST API."""

import django_filters
from django.db.models import Q

from scheduling.models import Node, Orchestrator, QuotaGrant, QuotaRequest, Team, Workload


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
