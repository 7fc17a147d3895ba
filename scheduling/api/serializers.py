from decimal import Decimal

from django.core.exceptions import ValidationError as DjangoValidationError
from rest_framework import serializers

from scheduling.api.fastpath import FastReadMixin, RelatedName
from scheduling.filters import visible_teams
from scheduling.limits import COMMENT_MAX_CHARS, JUSTIFICATION_MAX_CHARS
from scheduling.models import (
    CollectorRun,
    Node,
    NodeMove,
    Orchestrator,
    Queue,
    QuotaGrant,
    QuotaRequest,
    RebalancePlan,
    ReclaimPlan,
    Team,
    UsageRollup,
    UsageSample,
    Workload,
)
from scheduling.models.fleet import all_options_problems
from scheduling.rules import is_portal_admin
from scheduling.services.orchestrators import has_credentials, secret_destination_problem
from scheduling.validators import ENV_PREFIX, check_credentials_ref, check_endpoint


class NulSafeSlugRelatedField(serializers.SlugRelatedField):
    """A slug or name lookup that refuses NUL with a 400: PostgreSQL cannot even compare such a text (500)."""

    def to_internal_value(self, data):
        if isinstance(data, str) and "\x00" in data:
            raise serializers.ValidationError("must not contain NUL characters")
        return super().to_internal_value(data)


SLUG = NulSafeSlugRelatedField


class VisibleTeamField(NulSafeSlugRelatedField):
    """A team by slug, among the teams the requesting user may see only: a hidden team is refused exactly as a
    missing one ("Object with slug=... does not exist."), so a write never tells an outsider a team exists."""

    def __init__(self, **kwargs):
        super().__init__(slug_field="slug", queryset=Team.objects.none(), **kwargs)  # the choices: get_queryset

    def get_queryset(self):
        request = self.context.get("request")
        return visible_teams(request)


class ModelSerializer(FastReadMixin, serializers.ModelSerializer):
    """DRF's ModelSerializer with the same output, read through ``fastpath`` (list pages are the load)."""


class TeamSerializer(ModelSerializer):
    parent = SLUG(slug_field="slug", read_only=True)

    class Meta:
        model = Team
        fields = ["id", "slug", "name", "parent", "description"]


class QueueSerializer(ModelSerializer):
    team = VisibleTeamField()
    weight = serializers.DecimalField(max_digits=5, decimal_places=2, min_value=Decimal(0), max_value=Decimal(100))
    reason = serializers.CharField(
        write_only=True, max_length=COMMENT_MAX_CHARS, help_text="Why: recorded with your name in the history."
    )

    class Meta:
        model = Queue
        fields = ["id", "team", "gpu_model", "weight", "guaranteed", "burst_limit", "reason", "version"]
        validators = []  # the tree rules in services.governance decide, naming the field


class QueueHistorySerializer(serializers.Serializer):
    history_date = serializers.DateTimeField()
    history_user = serializers.CharField(source="history_user.username", default=None)
    history_change_reason = serializers.CharField(allow_null=True)
    history_type = serializers.CharField()
    weight = serializers.DecimalField(max_digits=5, decimal_places=2)
    guaranteed = serializers.IntegerField()
    burst_limit = serializers.IntegerField()


class AdminOnlyFieldsMixin:
    """Leaves out ``admin_only_fields`` for anyone but a portal admin: orchestrator errors name hosts,
    paths and server replies that only those who configure the orchestrators need."""

    admin_only_fields: tuple[str, ...] = ()

    def get_fields(self):
        fields = super().get_fields()
        request = self.context.get("request")
        if getattr(self.context.get("view"), "swagger_fake_view", False):
            return fields  # the schema documents them (as admins-only), whoever reads it
        if request is not None and not is_portal_admin(request.user):
            for name in self.admin_only_fields:
                fields.pop(name, None)
        return fields


def django_check(check):
    """A serializer validator from one of scheduling.validators' checks (the model runs the same ones)."""

    def validate(value):
        try:
            check(value)
        except DjangoValidationError as error:
            raise serializers.ValidationError(error.messages) from None
        return value

    return validate


class OrchestratorSerializer(AdminOnlyFieldsMixin, ModelSerializer):
    credentials_ref = serializers.CharField(
        write_only=True,
        required=False,
        allow_blank=True,
        validators=[django_check(check_credentials_ref)],
        help_text=f"env:{ENV_PREFIX}NAME or file:/path inside GPUPORTAL_CREDENTIALS_DIRS; never returned",
    )
    endpoint = serializers.CharField(max_length=300, validators=[django_check(check_endpoint)])
    stale = serializers.BooleanField(source="is_stale", read_only=True)
    has_credentials = serializers.SerializerMethodField()
    admin_only_fields = ("last_error", "options")  # options name files on the worker (slurm.conf, kubeconfig)

    class Meta:
        model = Orchestrator
        fields = [
            "id",
            "name",
            "kind",
            "endpoint",
            "credentials_ref",
            "has_credentials",
            "enabled",
            "node_domain",
            "options",
            "last_success_at",
            "last_error",
            "last_error_at",
            "stale",
        ]
        read_only_fields = ["last_success_at", "last_error", "last_error_at"]
        extra_kwargs = {"last_error": {"help_text": "The latest scrape's error; left out for all but portal admins."}}

    def get_has_credentials(self, obj) -> bool:
        return has_credentials(obj)

    def validate(self, attrs):
        """Options against the schema of the kind they will run under (a PATCH may change either)."""
        kind = attrs.get("kind", getattr(self.instance, "kind", None))
        problems = all_options_problems(kind, attrs.get("options", getattr(self.instance, "options", {})))
        if problems:
            raise serializers.ValidationError({"options": problems})
        endpoint = attrs.get("endpoint", getattr(self.instance, "endpoint", ""))
        moved = secret_destination_problem(self.instance, endpoint, "credentials_ref" in attrs)
        if moved:
            raise serializers.ValidationError({"credentials_ref": [moved]})
        return attrs


class NodeSerializer(ModelSerializer):
    orchestrator = RelatedName("name")

    class Meta:
        model = Node
        fields = [
            "id",
            "name",
            "domain",
            "orchestrator",
            "gpu_model",
            "gpu_total",
            "gpu_allocated",
            "cpu_total",
            "memory_mib",
            "nvlink_domain",
            "leaf_switch",
            "spine",
            "state",
            "pinned",
            "labels",
            "last_seen_at",
        ]


class WorkloadSerializer(ModelSerializer):
    orchestrator = RelatedName("name")
    team = RelatedName("slug", allow_null=True)
    gpus = serializers.IntegerField(read_only=True)

    class Meta:
        model = Workload
        fields = [
            "id",
            "external_id",
            "orchestrator",
            "team",
            "user",
            "cluster_user",
            "name",
            "kind",
            "gang_size",
            "gpus_per_member",
            "gpus",
            "state",
            "priority",
            "submitted_at",
            "started_at",
            "finished_at",
            "pending_reason",
            "nodes",
        ]


class QuotaRequestSerializer(ModelSerializer):
    team = VisibleTeamField()
    orchestrator = SLUG(slug_field="name", queryset=Orchestrator.objects.all(), required=False, allow_null=True)
    requester = RelatedName("username")
    decided_by = RelatedName("username", allow_null=True)
    gpus = serializers.IntegerField(min_value=1, max_value=1_000_000)

    class Meta:
        model = QuotaRequest
        fields = [
            "id",
            "team",
            "requester",
            "gpus",
            "gpu_model",
            "orchestrator",
            "starts_at",
            "ends_at",
            "justification",
            "state",
            "decided_by",
            "decided_at",
            "decision_comment",
            "created_at",
            "version",
        ]
        read_only_fields = ["state", "decided_at", "decision_comment", "created_at", "version"]
        extra_kwargs = {"justification": {"max_length": JUSTIFICATION_MAX_CHARS}}
        validators = []


class DecisionSerializer(serializers.Serializer):
    comment = serializers.CharField(required=False, allow_blank=True, default="", max_length=COMMENT_MAX_CHARS)
    version = serializers.IntegerField(
        required=False,
        min_value=1,
        help_text="The request's version you decided on (or send If-Match); a request amended since answers 412.",
    )


class AmendSerializer(serializers.Serializer):
    """The requester's correction of a submitted request: only the fields sent change (as the page's form)."""

    gpus = serializers.IntegerField(required=False, min_value=1, max_value=100_000)
    starts_at = serializers.DateTimeField(required=False)
    ends_at = serializers.DateTimeField(required=False)
    justification = serializers.CharField(required=False, max_length=JUSTIFICATION_MAX_CHARS)
    reason = serializers.CharField(
        max_length=COMMENT_MAX_CHARS, help_text="Why amend: the deciders see it with the change, in the history."
    )


class ExtendSerializer(serializers.Serializer):
    """Keep a live grant's GPUs longer: a new request from the grant's end to ``ends_at``, decided as any."""

    ends_at = serializers.DateTimeField(help_text="The new end; after the grant's end.")
    justification = serializers.CharField(
        max_length=JUSTIFICATION_MAX_CHARS, help_text="Why the GPUs are needed longer (the deciders read it)."
    )


class ReasonSerializer(serializers.Serializer):
    reason = serializers.CharField(max_length=COMMENT_MAX_CHARS)


class VersionedReasonSerializer(ReasonSerializer):
    """A decision on a versioned plan: a reason, and the plan's version decided on (or send If-Match)."""

    version = serializers.IntegerField(
        required=False,
        min_value=1,
        help_text="The plan's version you decided on (its ETag; or send If-Match); a plan changed since answers 412.",
    )


class QuotaGrantSerializer(ModelSerializer):
    team = SLUG(slug_field="slug", read_only=True)
    orchestrator = SLUG(slug_field="name", read_only=True)

    class Meta:
        model = QuotaGrant
        fields = ["id", "request", "team", "gpus", "gpu_model", "orchestrator", "starts_at", "ends_at", "state"]


class UsageSampleSerializer(ModelSerializer):
    orchestrator = RelatedName("name")
    team = RelatedName("slug", allow_null=True)

    class Meta:
        model = UsageSample
        fields = [
            "taken_at",
            "orchestrator",
            "team",
            "gpus_total",
            "gpus_allocated",
            "gpus_busy",
            "gpus_pending",
            "interval_s",
        ]


class UsageRollupSerializer(ModelSerializer):
    orchestrator = RelatedName("name")
    team = RelatedName("slug", allow_null=True)

    class Meta:
        model = UsageRollup
        fields = [
            "resolution",
            "period_start",
            "orchestrator",
            "team",
            "gpu_s_total",
            "gpu_s_allocated",
            "gpu_s_busy",
            "gpu_s_pending",
            "covered_s",
        ]


class CollectorRunSerializer(AdminOnlyFieldsMixin, ModelSerializer):
    orchestrator = RelatedName("name")
    error = serializers.CharField(read_only=True, help_text="What failed; left out for all but portal admins.")
    admin_only_fields = ("error",)

    class Meta:
        model = CollectorRun
        fields = [
            "id",
            "orchestrator",
            "started_at",
            "duration_ms",
            "ok",
            "error",
            "nodes",
            "gpus_total",
            "gpus_allocated",
            "workloads_running",
            "workloads_pending",
            "pending_gpus",
        ]


class NodeMoveSerializer(ModelSerializer):
    node = SLUG(slug_field="name", read_only=True)
    source = SLUG(slug_field="name", read_only=True)
    target = SLUG(slug_field="name", read_only=True)

    class Meta:
        model = NodeMove
        fields = ["node", "source", "target", "drain_cost_gpu_s", "reason", "state"]


class RebalancePlanSerializer(ModelSerializer):
    moves = NodeMoveSerializer(many=True, read_only=True)

    class Meta:
        model = RebalancePlan
        fields = [
            *("id", "created_at", "state", "dry_run", "reason", "expected_effect"),
            *("decided_at", "error", "moves", "version"),
        ]


class ReclaimPlanSerializer(ModelSerializer):
    """A reclaim of borrowed GPUs (docs/governance.md, "Reclaim"): each reclaim with its cause and victims, the
    claims passed over with why, and what applying did."""

    orchestrator = serializers.SlugRelatedField(slug_field="name", read_only=True)
    decided_by = serializers.SlugRelatedField(slug_field="username", read_only=True)
    gpus = serializers.FloatField(read_only=True)

    class Meta:
        model = ReclaimPlan
        fields = ["id", "orchestrator", "created_at", "mode", "state", "dry_run", "cause", "gpus", "reclaims",
                  "passed", "actions", "decided_by", "decided_at", "reason", "error", "version"]
        read_only_fields = fields


class FragmentationSerializer(serializers.Serializer):
    largest_placeable = serializers.DictField(child=serializers.IntegerField(), help_text="GPU count -> gangs")
    gpus_free = serializers.IntegerField()
    gpus_total = serializers.IntegerField()


class TokenSerializer(serializers.Serializer):
    expiry = serializers.DateTimeField()
    token = serializers.CharField(help_text="Send as 'Authorization: Token <token>'; shown only once.")
