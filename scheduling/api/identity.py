"""Group mappings (directory group pattern -> team, role): anyone signed in reads, admins write with a
``reason`` recorded with their name in the mapping's history (docs/identity.md)."""

from rest_framework import serializers

from scheduling.models import GroupMapping, Team
from scheduling.services import identity

from .ledger import REASON, AuditedViewSet


class GroupMappingSerializer(serializers.ModelSerializer):
    team = serializers.SlugRelatedField(slug_field="slug", queryset=Team.objects.all())
    reason = serializers.CharField(**REASON)

    class Meta:
        model = GroupMapping
        fields = ["id", "pattern", "team", "role", "reason"]


class GroupMappingViewSet(AuditedViewSet):
    """Members of a group matching ``pattern`` (shell-style, any case) belong to ``team`` as ``role``."""

    queryset = GroupMapping.objects.select_related("team")
    serializer_class = GroupMappingSerializer
    filterset_fields = ["role"]
    write_permission = "scheduling.edit_group_mappings"
    save_row = staticmethod(identity.save_group_mapping)
