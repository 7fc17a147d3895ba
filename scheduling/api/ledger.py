"""The GPU ledger's API: findings and ownership intervals (read), inventory and aliases (admins write).

The findings list filters with the same FilterSet as the Ledger page (``scheduling.filters``). Inventory and
alias writes need a ``reason``, stored with the author in their history (django-simple-history).
"""

from django.core.exceptions import ValidationError as DjangoValidationError
from rest_framework import serializers, viewsets

from scheduling import filters
from scheduling.limits import COMMENT_MAX_CHARS
from scheduling.models import FleetHost, LedgerFinding, NodeAlias, Orchestrator, OwnershipInterval
from scheduling.selectors import ledger as ledger_reads
from scheduling.services import ledger
from scheduling.services.audit import stamp_author

from .list_cache import CachedListMixin
from .permissions import ReadOrAdminWrite

SLUG = serializers.SlugRelatedField
REASON = {
    "write_only": True,
    "max_length": COMMENT_MAX_CHARS,
    "help_text": "Why: recorded with your name in the history.",
}


class LedgerFindingSerializer(serializers.ModelSerializer):
    status = serializers.CharField(read_only=True)
    kind_label = serializers.CharField(source="get_kind_display", read_only=True)
    orchestrators = serializers.SerializerMethodField()

    class Meta:
        model = LedgerFinding
        fields = [
            "id",
            "kind",
            "kind_label",
            "severity",
            "status",
            "node",
            "orchestrators",
            "explanation",
            "first_seen",
            "last_seen",
            "opened_at",
            "closed_at",
        ]

    def get_orchestrators(self, obj) -> list[str]:
        return list(obj.orchestrator_names)


class OwnershipIntervalSerializer(serializers.ModelSerializer):
    orchestrator = SLUG(slug_field="name", read_only=True)

    class Meta:
        model = OwnershipInterval
        fields = ["id", "node", "orchestrator", "started_at", "ended_at"]


class FleetHostSerializer(serializers.ModelSerializer):
    reason = serializers.CharField(**REASON)

    class Meta:
        model = FleetHost
        fields = ["id", "name", "gpu_model", "gpu_total", "gpu_uuids", "retired", "notes", "reason"]

    def validate_gpu_uuids(self, value):
        if not isinstance(value, list) or not all(isinstance(u, str) and u for u in value):
            raise serializers.ValidationError("gpu_uuids must be a list of non-empty strings (nvidia-smi -L)")
        return value


class NodeAliasSerializer(serializers.ModelSerializer):
    orchestrator = SLUG(slug_field="name", queryset=Orchestrator.objects.all())
    host = SLUG(slug_field="name", queryset=FleetHost.objects.all())
    reason = serializers.CharField(**REASON)

    class Meta:
        model = NodeAlias
        fields = ["id", "orchestrator", "name", "host", "reason"]


class DeleteReasonSerializer(serializers.Serializer):
    reason = serializers.CharField(allow_blank=True, **REASON)  # blank: stamp_author says a reason is required


class LedgerFindingViewSet(CachedListMixin, viewsets.ReadOnlyModelViewSet):
    """Open and closed findings (pending ones are still inside their grace and not shown)."""

    queryset = ledger_reads.shown_findings().order_by("-opened_at")
    serializer_class = LedgerFindingSerializer
    filterset_class = filters.LedgerFindingFilter


class OwnershipIntervalViewSet(CachedListMixin, viewsets.ReadOnlyModelViewSet):
    """Who could schedule on which node, from when until when (``ended_at`` null: still)."""

    queryset = OwnershipInterval.objects.select_related("orchestrator").order_by("node", "started_at")
    serializer_class = OwnershipIntervalSerializer
    filterset_class = filters.OwnershipIntervalFilter


class AuditedViewSet(CachedListMixin, viewsets.ModelViewSet):
    """Admins write rows with a ``reason`` (also on DELETE), saved by ``save_row`` with the author."""

    permission_classes = [ReadOrAdminWrite]
    write_permission = "scheduling.edit_inventory"
    save_row = staticmethod(ledger.save_inventory_row)
    http_method_names = ["get", "post", "put", "patch", "delete", "head", "options"]

    def perform_create(self, serializer):
        self._save(serializer)

    def perform_update(self, serializer):
        self._save(serializer)

    def _save(self, serializer):
        data = dict(serializer.validated_data)
        reason = data.pop("reason", "")
        instance = serializer.instance or serializer.Meta.model()
        for field, value in data.items():
            setattr(instance, field, value)
        try:
            self.save_row(instance, by=self.request.user, reason=reason)
        except DjangoValidationError as error:
            raise serializers.ValidationError(error.message_dict) from error
        serializer.instance = instance

    def perform_destroy(self, instance):
        # DELETE has no serializer: the reason's field rules (bounded, no NUL) are applied here.
        given = self.request.query_params.get("reason") or self.request.data.get("reason", "")
        body = DeleteReasonSerializer(data={"reason": given})
        body.is_valid(raise_exception=True)
        reason = body.validated_data["reason"]
        try:
            stamp_author(instance, by=self.request.user, reason=reason)
        except DjangoValidationError as error:
            raise serializers.ValidationError(error.message_dict) from error
        instance.delete()


class FleetHostViewSet(AuditedViewSet):
    """The fleet inventory: the physical hosts each orchestrator's view is joined to."""

    queryset = FleetHost.objects.all()
    serializer_class = FleetHostSerializer
    filterset_fields = ["retired", "gpu_model"]


class NodeAliasViewSet(AuditedViewSet):
    """A node named differently in one orchestrator (``orchestrator`` + ``name``) is ``host``."""

    queryset = NodeAlias.objects.select_related("orchestrator", "host")
    serializer_class = NodeAliasSerializer
    filterset_class = filters.NodeAliasFilter
