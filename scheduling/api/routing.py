"""``POST /api/v1/route``: where should this workload go, and why (``selectors.routing.route_workload``).

Advice only: nothing is submitted. The team must be one the caller may see (a team they belong to, or
below one; any team for portal admins), since the answer shows that team's cap and queue positions.
"""

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.permissions import IsAuthenticated
from rest_framework.response import Response
from rest_framework.views import APIView

from scheduling.engine.submissions import SCHEDULER_NAMES, WorkloadDescription
from scheduling.engine.types import WorkloadKind
from scheduling.models import Team
from scheduling.selectors import access
from scheduling.selectors.routing import route_workload

MAX_MEMBERS = 4096
MAX_GPUS_PER_MEMBER = 64
MAX_DURATION_S = 366 * 86_400


class RouteRequestSerializer(serializers.Serializer):
    gpus = serializers.IntegerField(min_value=1, max_value=MAX_GPUS_PER_MEMBER, help_text="GPUs per gang member")
    gang_size = serializers.IntegerField(min_value=1, max_value=MAX_MEMBERS, default=1)
    duration_s = serializers.IntegerField(min_value=0, max_value=MAX_DURATION_S, default=0,
                                          help_text="expected run time; 0 = unknown")
    team = serializers.SlugField()
    kind = serializers.ChoiceField(choices=[k.value for k in WorkloadKind], default=WorkloadKind.BATCH.value)
    scheduler = serializers.ChoiceField(
        choices=sorted(SCHEDULER_NAMES), required=False, allow_blank=True, default="",
        help_text="an explicit scheduler (the scheduler.gpuportal.io/scheduler annotation)",
    )
    latency_sla_ms = serializers.FloatField(min_value=0, required=False, allow_null=True, default=None)

    def validate_team(self, slug: str) -> str:
        user = self.context["request"].user
        team = Team.objects.filter(slug=slug).first()
        visible = access.team_ids_visible_to(user)  # None: every team
        if team is None or (visible is not None and team.pk not in visible):
            raise serializers.ValidationError(f"no team {slug!r} that you belong to")
        return slug


class CandidateSerializer(serializers.Serializer):
    pool = serializers.CharField()
    kind = serializers.CharField()
    predicted_wait_s = serializers.FloatField(allow_null=True)
    position = serializers.IntegerField()
    basis = serializers.CharField()


class RouteAnswerSerializer(serializers.Serializer):
    orchestrator = serializers.CharField()
    pool = serializers.CharField()
    rule = serializers.CharField()
    reasons = serializers.ListField(child=serializers.CharField())
    candidates = CandidateSerializer(many=True)


class RouteView(APIView):
    permission_classes = [IsAuthenticated]

    @extend_schema(request=RouteRequestSerializer, responses=RouteAnswerSerializer)
    def post(self, request):
        given = RouteRequestSerializer(data=request.data, context={"request": request})
        given.is_valid(raise_exception=True)
        data = given.validated_data
        answer = route_workload(WorkloadDescription(
            gpus_per_member=data["gpus"], members=data["gang_size"], duration_s=float(data["duration_s"]),
            team=data["team"], kind=data["kind"], scheduler=data["scheduler"], latency_sla_ms=data["latency_sla_ms"],
            source="api",
        ))
        return Response(RouteAnswerSerializer(answer).data)
