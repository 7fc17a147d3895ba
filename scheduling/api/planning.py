"""What-if API: submit a scenario (admins and team leads) and poll it (whoever may read it)."""

from rest_framework import exceptions, mixins, serializers, viewsets

from scheduling.models import WhatIfScenario
from scheduling.selectors import access
from scheduling.services import whatif
from scheduling.tasks import run_whatif

from .list_cache import CachedListMixin
from .serializers import VisibleTeamField


class WhatIfSerializer(serializers.ModelSerializer):
    team = VisibleTeamField(required=False, allow_null=True)
    created_by = serializers.CharField(source="created_by.username", read_only=True)
    inputs = serializers.JSONField(
        help_text="weeks, seed, fleet, weights, policies, quota_request (docs/forecast-whatif.md)"
    )

    class Meta:
        model = WhatIfScenario
        fields = [
            "id",
            "name",
            "team",
            "inputs",
            "status",
            "progress",
            "results",
            "error",
            "created_by",
            "created_at",
            "started_at",
            "finished_at",
        ]
        read_only_fields = ["status", "progress", "results", "error", "created_at", "started_at", "finished_at"]


def _enqueue(pk: int) -> None:
    run_whatif.delay(pk)


class WhatIfViewSet(CachedListMixin, mixins.CreateModelMixin, viewsets.ReadOnlyModelViewSet):
    """POST runs a scenario as a Celery task (201 with its id); GET ``/{id}/`` polls status, progress, results."""

    queryset = WhatIfScenario.objects.all()  # narrowed per user in get_queryset
    serializer_class = WhatIfSerializer

    def get_queryset(self):
        return access.whatifs_readable_by(self.request.user)

    def perform_create(self, serializer):
        if not whatif.can_run(self.request.user):
            raise exceptions.PermissionDenied("only portal admins and team leads run what-if scenarios")
        data = serializer.validated_data
        serializer.instance = whatif.submit(
            name=data["name"],
            raw_inputs=data["inputs"],
            by=self.request.user,
            team=data.get("team"),
            enqueue=_enqueue,
        )
