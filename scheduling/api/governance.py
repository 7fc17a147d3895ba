"""``/api/v1/governance/``: governance rounds, drift findings and review-mode plans for operators and scripts,
admins only (as the Governance page: ``scheduling.enforce_governance``).

- ``status/``: the last finished round, the round holding the lease, each orchestrator's latest outcome, drift
  and plans waiting (count and oldest age), guarantees not kept;
- ``rounds/`` (``?failed=true``): rounds with each orchestrator's outcome and the ids of objects not in step;
- ``drift/`` (``?state=open``): hand edits found on the clusters; ``POST drift/<id>/revert/`` or ``adopt/`` with a
  ``reason``;
- ``plans/`` (``?state=pending``): changes waiting in review mode; ``POST plans/<id>/approve/`` or ``reject/`` with
  a ``reason``.
Decisions go through services/enforcement/decisions.py, audited with who and why, as on the page."""

from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework import permissions, serializers, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response
from rest_framework.views import APIView

from scheduling.api.serializers import ReasonSerializer, VersionedReasonSerializer
from scheduling.api.versioning import VersionETagMixin, versioned_decision
from scheduling.models import DriftFinding, EnforcementOutcome, EnforcementPlan, EnforcementRun
from scheduling.selectors import governance_ops
from scheduling.services.enforcement import decisions as enforcement_decisions


class GovernanceAdmins(permissions.IsAuthenticated):
    message = "Only portal admins see and decide governance enforcement."

    def has_permission(self, request, view):
        return super().has_permission(request, view) and request.user.has_perm("scheduling.enforce_governance")


class OutcomeSerializer(serializers.ModelSerializer):
    orchestrator = serializers.CharField(source="orchestrator.name", read_only=True)

    class Meta:
        model = EnforcementOutcome
        fields = ["orchestrator", "mode", "applied", "unchanged", "drifted", "failed", "pending", "read_back",
                  "error", "object_ids"]  # fmt: skip


class RoundSerializer(serializers.ModelSerializer):
    outcomes = OutcomeSerializer(many=True, read_only=True)
    state = serializers.SerializerMethodField()

    class Meta:
        model = EnforcementRun
        fields = ["id", "started_at", "finished_at", "heartbeat_at", "state", "error", "outcomes"]

    def get_state(self, run: EnforcementRun) -> str:
        """running | failed (on some orchestrator, or cut short) | ok."""
        if run.finished_at is None:
            return "running"
        return "failed" if run.error else "ok"


class DriftSerializer(serializers.ModelSerializer):
    orchestrator = serializers.CharField(source="orchestrator.name", read_only=True)
    decided_by = serializers.CharField(source="decided_by.username", read_only=True, default=None)

    class Meta:
        model = DriftFinding
        fields = ["id", "orchestrator", "object_id", "team", "state", "fields", "applied", "observed", "desired",
                  "found_at", "decided_by", "decided_at", "reason"]  # fmt: skip


class PlanSerializer(serializers.ModelSerializer):
    orchestrator = serializers.CharField(source="orchestrator.name", read_only=True)
    decided_by = serializers.CharField(source="decided_by.username", read_only=True, default=None)

    class Meta:
        model = EnforcementPlan
        fields = ["id", "orchestrator", "state", "changes", "cause", "created_at", "decided_by", "decided_at",
                  "reason", "version"]  # fmt: skip


class _Decisions:
    """``POST <id>/<decision>/`` with a reason: the service decides (a decided row is a 400 naming ``state``)."""

    def _decide(self, request, act):
        body = ReasonSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        decided = act(self.get_object(), by=request.user, reason=body.validated_data["reason"])
        return Response(self.get_serializer(decided).data)

    def _decide_versioned(self, request, act):
        """A plan: decided only as of the version the caller read (If-Match or ``version``; stale is 412)."""
        decided = act(self.get_object(), by=request.user, **versioned_decision(request))
        return Response(self.get_serializer(decided).data)


class RoundViewSet(viewsets.ReadOnlyModelViewSet):
    serializer_class = RoundSerializer
    permission_classes = [GovernanceAdmins]

    def get_queryset(self):
        rounds = EnforcementRun.objects.filter(dry_run=False).prefetch_related("outcomes__orchestrator")
        if self.request.query_params.get("failed") in ("true", "1"):
            rounds = rounds.exclude(error="")
        return rounds.order_by("-started_at")


class DriftViewSet(_Decisions, viewsets.ReadOnlyModelViewSet):
    serializer_class = DriftSerializer
    permission_classes = [GovernanceAdmins]
    filterset_fields = ["state", "team"]

    def get_queryset(self):
        return DriftFinding.objects.select_related("orchestrator", "decided_by")

    @extend_schema(request=ReasonSerializer, responses=DriftSerializer)
    @action(detail=True, methods=["post"])
    def revert(self, request, pk=None):
        """The next round writes the portal's intent over the hand edit."""
        return self._decide(request, enforcement_decisions.revert_drift)

    @extend_schema(request=ReasonSerializer, responses=DriftSerializer)
    @action(detail=True, methods=["post"])
    def adopt(self, request, pk=None):
        """Keep the cluster's value until the portal's intent for the object changes."""
        return self._decide(request, enforcement_decisions.adopt_drift)


class PlanViewSet(VersionETagMixin, _Decisions, viewsets.ReadOnlyModelViewSet):
    serializer_class = PlanSerializer
    permission_classes = [GovernanceAdmins]
    filterset_fields = ["state"]

    def get_queryset(self):
        return EnforcementPlan.objects.select_related("orchestrator", "decided_by")

    @extend_schema(request=VersionedReasonSerializer, responses=PlanSerializer)
    @action(detail=True, methods=["post"])
    def approve(self, request, pk=None):
        """The next round applies the plan's changes still needed."""
        return self._decide_versioned(request, enforcement_decisions.approve_plan)

    @extend_schema(request=VersionedReasonSerializer, responses=PlanSerializer)
    @action(detail=True, methods=["post"])
    def reject(self, request, pk=None):
        return self._decide_versioned(request, enforcement_decisions.reject_plan)


class GovernanceStatusView(APIView):
    """One answer for a dashboard or a script: is governance running, failing, waiting on an admin?"""

    permission_classes = [GovernanceAdmins]

    @extend_schema(responses=OpenApiTypes.OBJECT)
    def get(self, request):
        now = timezone.now()
        status = governance_ops.rounds_status()
        last, running = status.last_finished, status.in_progress
        return Response(
            {
                "last_round": RoundSerializer(last).data if last else None,
                "round_in_progress": RoundSerializer(running).data if running else None,
                "orchestrators": OutcomeSerializer(status.outcomes, many=True).data,
                "drift_open": [_waiting(w) for w in governance_ops.open_drift(now)],
                "plans_pending": [_waiting(w) for w in governance_ops.pending_plans(now)],
                "guarantees_unmet": [
                    {"team": g.team, "guaranteed": g.guaranteed, "held": g.held, "pending": g.pending, "unmet": g.unmet}
                    for g in governance_ops.guarantee_gaps()
                    if g.unmet
                ],
            }
        )


def _waiting(row: governance_ops.Waiting) -> dict:
    return {"orchestrator": row.orchestrator, "count": row.count, "oldest_seconds": round(row.oldest_s)}
