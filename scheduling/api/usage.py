"""The utilisation drill-down over the API: a team's GPU-hours per user in a window, then a user's jobs.

The same selectors and the same visibility as the pages (``scheduling/views/drilldown.py``): per-user rows
follow ``access.usage_users_readable_by`` (the weekly report's rule; other members see their own row and one
summed "other users" row), a team one may not see is a 404.
"""

from datetime import UTC, datetime, timedelta

from django.http import Http404
from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.permissions import IsAuthenticated
from rest_framework.response import Response
from rest_framework.views import APIView

from scheduling.limits import NUL, NUL_RULE
from scheduling.models import Team
from scheduling.selectors import access, drilldown

DEFAULT_SPAN = timedelta(days=7)
LONGEST_SPAN = timedelta(days=366)


class WindowSerializer(serializers.Serializer):
    since = serializers.DateTimeField(required=False, help_text="Start of the window (default: until − 7 days).")
    until = serializers.DateTimeField(required=False, help_text="End of the window (default: now).")

    def validate(self, attrs):
        until = attrs.get("until") or timezone.now()
        if attrs.get("since") is None and until - datetime.min.replace(tzinfo=UTC) < DEFAULT_SPAN:
            # Compared as a difference: until − 7 days would overflow before year 1 (a 500).
            raise serializers.ValidationError({"until": "leaves no default window before it: give since too."})
        since = attrs.get("since") or until - DEFAULT_SPAN
        if since >= until:
            raise serializers.ValidationError({"since": "must be before until."})
        if until - since > LONGEST_SPAN:
            raise serializers.ValidationError({"until": "may be at most 366 days after since."})
        return {"since": since, "until": until}


class UserUsageSerializer(serializers.Serializer):
    user = serializers.CharField()
    named = serializers.BooleanField(help_text="False for the summed row of users the reader may not see by name.")
    gpu_hours = serializers.FloatField()
    jobs = serializers.IntegerField(help_text="Jobs that held GPUs in the window.")
    mean_wait_s = serializers.FloatField(allow_null=True)
    p95_wait_s = serializers.FloatField(allow_null=True)
    share_pct = serializers.FloatField()


class TeamUsersSerializer(serializers.Serializer):
    team = serializers.CharField(source="team.slug")
    since = serializers.DateTimeField()
    until = serializers.DateTimeField()
    gpu_hours = serializers.FloatField(help_text="Job accounting; the users' rows add up to it.")
    sampled_gpu_hours = serializers.FloatField(source="sampled_h", allow_null=True)
    users = UserUsageSerializer(source="rows", many=True)


class JobInWindowSerializer(serializers.Serializer):
    id = serializers.IntegerField(source="pk")
    orchestrator = serializers.CharField()
    external_id = serializers.CharField()
    name = serializers.CharField()
    user = serializers.CharField()
    team = serializers.CharField()
    state = serializers.CharField()
    gpus = serializers.IntegerField()
    submitted_at = serializers.DateTimeField()
    started_at = serializers.DateTimeField(allow_null=True)
    finished_at = serializers.DateTimeField(allow_null=True)
    gpu_hours = serializers.FloatField(help_text="GPU-hours inside the window.")
    wait_s = serializers.FloatField(allow_null=True, help_text="Start minus submit; null when not started.")


WINDOW_PARAMETERS = [
    OpenApiParameter("since", OpenApiTypes.DATETIME, description="Start of the window (default: until − 7 d)."),
    OpenApiParameter("until", OpenApiTypes.DATETIME, description="End of the window (default: now)."),
]


class _DrillDownView(APIView):
    permission_classes = [IsAuthenticated]

    def team_and_window(self, request, slug: str):
        team = access.team_or_404(request.user, slug)
        window = WindowSerializer(data=request.query_params)
        window.is_valid(raise_exception=True)
        return team, window.validated_data["since"], window.validated_data["until"]


class TeamUsersView(_DrillDownView):
    """A team's GPU-hours (its sub-teams included) per user in the window."""

    @extend_schema(parameters=WINDOW_PARAMETERS, responses=TeamUsersSerializer)
    def get(self, request, slug: str):
        team, since, until = self.team_and_window(request, slug)
        usage = drilldown.team_users(team, since, until, access.usage_users_readable_by(request.user, team))
        data = TeamUsersSerializer({**usage.__dict__, "since": since, "until": until}).data
        return Response(data)


class UserJobsView(_DrillDownView):
    """One user's jobs in the team (its sub-teams included) in the window: those that ran, submitted or waited."""

    @extend_schema(parameters=WINDOW_PARAMETERS, responses=JobInWindowSerializer(many=True))
    def get(self, request, slug: str, user: str):
        if NUL in user:
            raise serializers.ValidationError({"user": NUL_RULE})
        team, since, until = self.team_and_window(request, slug)
        readable = access.usage_users_readable_by(request.user, team)
        if readable is not None and user not in readable:
            raise Http404("No user of this team matches the given query.")
        jobs = drilldown.jobs_in_window(Team.objects.tree().subtree(team.pk), since, until, user)
        return Response(JobInWindowSerializer(jobs, many=True).data)
