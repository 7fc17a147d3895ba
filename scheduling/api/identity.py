"""Group mappings (directory group pattern -> team, role) and identity overrides (submitter name -> portal
user): admins read all and write; others read the mappings of their teams and their own overrides
(``selectors.access``); admins write with a ``reason`` recorded with their name in the row's history
(docs/identity.md)."""

from django.contrib.auth import get_user_model
from rest_framework import serializers

from scheduling.models import GroupMapping, IdentityOverride, Orchestrator
from scheduling.selectors import access
from scheduling.services import identity

from .ledger import REASON, AuditedViewSet
from .serializers import VisibleTeamField


class GroupMappingSerializer(serializers.ModelSerializer):
    team = VisibleTeamField()
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

    def get_queryset(self):
        return access.group_mappings_visible_to(self.request.user, super().get_queryset())


class IdentityOverrideSerializer(serializers.ModelSerializer):
    user = serializers.SlugRelatedField(
        slug_field="username", queryset=get_user_model().objects.all(),
        error_messages={"does_not_exist": "{value!r} is not a portal user"},
    )
    orchestrator = serializers.SlugRelatedField(
        slug_field="name", queryset=Orchestrator.objects.filter(kind__in=Orchestrator.SCHEDULER_KINDS),
        required=False, allow_null=True,
        error_messages={"does_not_exist": "{value!r} is not a Slurm, Kubernetes or Ray orchestrator"},
    )
    reason = serializers.CharField(**REASON)

    class Meta:
        model = IdentityOverride
        fields = ["id", "user", "orchestrator", "kind", "name", "reason"]
        validators = []  # the model's conditional unique constraints, checked by full_clean on save


class IdentityOverrideViewSet(AuditedViewSet):
    """On ``orchestrator`` (null: every one) the ``kind`` name ``name`` is portal user ``user``."""

    queryset = IdentityOverride.objects.select_related("user", "orchestrator")
    serializer_class = IdentityOverrideSerializer
    filterset_fields = ["kind"]
    write_permission = "scheduling.edit_identity_overrides"
    save_row = staticmethod(identity.save_identity_override)

    def get_queryset(self):
        return access.identity_overrides_visible_to(self.request.user, super().get_queryset())
