"""FilterSets for the API lists (time windows, team, orchestrator, state)."""

import django_filters as filters

from scheduling.filters import IsoTimeFilter
from scheduling.models import CollectorRun, Node, QuotaRequest, UsageRollup, UsageSample, Workload


class NodeFilter(filters.FilterSet):
    orchestrator = filters.CharFilter(field_name="orchestrator__name")

    class Meta:
        model = Node
        fields = ["orchestrator", "gpu_model", "state", "leaf_switch", "nvlink_domain", "pinned"]


class WorkloadFilter(filters.FilterSet):
    orchestrator = filters.CharFilter(field_name="orchestrator__name")
    team = filters.CharFilter(field_name="team__slug")
    submitted_after = IsoTimeFilter(field_name="submitted_at", lookup_expr="gte")
    submitted_before = IsoTimeFilter(field_name="submitted_at", lookup_expr="lt")

    class Meta:
        model = Workload
        fields = ["orchestrator", "team", "state", "kind", "user"]


class QuotaRequestFilter(filters.FilterSet):
    team = filters.CharFilter(field_name="team__slug")

    class Meta:
        model = QuotaRequest
        fields = ["team", "state", "gpu_model"]


class _UsageFilter(filters.FilterSet):
    orchestrator = filters.CharFilter(field_name="orchestrator__name")
    team = filters.CharFilter(field_name="team__slug")
    pool = filters.BooleanFilter(field_name="team", lookup_expr="isnull", label="pool rows only (team is null)")


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


class CollectorRunFilter(filters.FilterSet):
    orchestrator = filters.CharFilter(field_name="orchestrator__name")

    class Meta:
        model = CollectorRun
        fields = ["orchestrator", "ok"]
