"""``/api/v1/admission/decisions/``: every answer of the mutating admission webhook and every "admission
bypassed" finding (``?bypassed=true``: a GPU pod in a team namespace created without the webhook's decision).

Admins see all of them; others see the rows of the teams they may see (``selectors.access``): a pod's name,
namespace and creator are its team's business.
"""

from rest_framework import serializers, viewsets

from scheduling import filters
from scheduling.models import AdmissionDecision
from scheduling.selectors.access import only_visible

from .list_cache import CachedListMixin


class AdmissionDecisionSerializer(serializers.ModelSerializer):
    team = serializers.SlugRelatedField(slug_field="slug", read_only=True)

    class Meta:
        model = AdmissionDecision
        fields = ["id", "at", "bypassed", "uid", "user", "namespace", "name", "kind", "team", "allowed", "patched",
                  "scheduler", "pool", "message", "reasons"]


class AdmissionDecisionViewSet(CachedListMixin, viewsets.ReadOnlyModelViewSet):
    queryset = AdmissionDecision.objects.all()  # narrowed per user in get_queryset
    serializer_class = AdmissionDecisionSerializer
    filterset_class = filters.AdmissionDecisionFilter

    def get_queryset(self):
        return only_visible(AdmissionDecision.objects.select_related("team"), self.request.user)
