"""Viewsets: queryset + serializer + filterset; writes go through the services."""

from django.http import JsonResponse
from django.utils import timezone
from drf_spectacular.utils import extend_schema
from knox import views as knox_views
from rest_framework import mixins, status, viewsets
from rest_framework.authentication import SessionAuthentication
from rest_framework.decorators import action
from rest_framework.permissions import IsAuthenticated
from rest_framework.response import Response
from rest_framework.views import APIView

from scheduling import filters
from scheduling.models import (
    CollectorRun,
    Node,
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
from scheduling.selectors import access, fleet
from scheduling.selectors import reclaim as reclaim_reads
from scheduling.selectors.access import only_visible, pools_or_visible, quota_requests_visible_to
from scheduling.services import collection, freshness, governance, idempotency, quota, reclaim
from scheduling.services import health as health_checks
from scheduling.services.audit import stamp_author
from scheduling.tasks import apply_reclaim_plan

from . import list_cache, serializers
from .auth import LockoutAwareBasicAuthentication, SingleQueryTokenAuthentication, purge_expired_tokens
from .fastpath import related_names
from .idempotency import IDEMPOTENCY_HEADER, IDEMPOTENCY_KEY, idempotency_key
from .list_cache import CachedListMixin
from .metrics import monitoring_access
from .permissions import ReadOrAdminWrite
from .versioning import VersionETagMixin, if_match, seen_version, versioned_decision

# Rows name their orchestrator only: leave its JSON settings unread (decoded twice per row otherwise).
ORCHESTRATOR_JSON = ("orchestrator__options", "orchestrator__breaker_state")


class TeamViewSet(CachedListMixin, viewsets.ReadOnlyModelViewSet):
    queryset = Team.objects.all()  # narrowed per user in get_queryset
    serializer_class = serializers.TeamSerializer
    lookup_field = "slug"
    lookup_value_regex = r"[-a-zA-Z0-9_]+"  # a slug, as the model allows: anything else (NUL included) is a 404
    filterset_fields = ["parent"]

    def get_queryset(self):
        return only_visible(Team.objects.select_related("parent"), self.request.user, "pk")


class QueueViewSet(VersionETagMixin, CachedListMixin, viewsets.ModelViewSet):
    """Entitlements. Writes are admin-only, validated over the whole team tree, and need a ``reason``."""

    queryset = Queue.objects.all()  # narrowed per user in get_queryset
    serializer_class = serializers.QueueSerializer
    permission_classes = [ReadOrAdminWrite]
    write_permission = "scheduling.edit_entitlements"
    filterset_fields = ["gpu_model"]
    http_method_names = ["get", "post", "put", "patch", "head", "options"]

    def get_queryset(self):
        return only_visible(Queue.objects.select_related("team"), self.request.user)

    def perform_create(self, serializer):
        serializer.instance = self._apply(serializer.validated_data)

    def perform_update(self, serializer):
        data = {
            **{
                f: getattr(serializer.instance, f) for f in ("team", "gpu_model", "weight", "guaranteed", "burst_limit")
            },
            **serializer.validated_data,
        }
        serializer.instance = self._apply(data, seen_version=if_match(self.request))

    def _apply(self, data, seen_version: int | None = None):
        change = governance.QueueChange(
            data["team"],
            data.get("gpu_model", ""),
            data["weight"],
            data.get("guaranteed", 0),
            data.get("burst_limit", 0),
            seen_version=seen_version,
        )
        return governance.apply_queue_changes([change], by=self.request.user, reason=data.get("reason", ""))[0]

    @extend_schema(responses=serializers.QueueHistorySerializer(many=True))
    @action(detail=True, methods=["get"])
    def history(self, request, pk=None):
        rows = self.get_object().history.select_related("history_user")[:200]
        return Response(serializers.QueueHistorySerializer(rows, many=True).data)


class OrchestratorViewSet(CachedListMixin, viewsets.ModelViewSet):
    """Endpoints. Credentials are a write-only reference (``env:`` / ``file:``); the secret is never stored."""

    queryset = Orchestrator.objects.all()
    serializer_class = serializers.OrchestratorSerializer
    permission_classes = [ReadOrAdminWrite]
    write_permission = "scheduling.edit_orchestrators"
    filterset_fields = ["kind", "enabled"]
    http_method_names = ["get", "post", "put", "patch", "head", "options"]

    def perform_create(self, serializer):
        data = serializer.validated_data
        serializer.instance, _ = collection.register_orchestrator(
            kind=data["kind"],
            name=data["name"],
            url=data["endpoint"],
            credentials_ref=data.get("credentials_ref", ""),
            options=data.get("options"),
            enabled=data.get("enabled", True),
            by=self.request.user,
            reason="registered through the API",
        )

    def perform_update(self, serializer):
        stamp_author(serializer.instance, by=self.request.user, reason="changed through the API")
        serializer.save()


class NodeViewSet(CachedListMixin, viewsets.ReadOnlyModelViewSet):
    queryset = Node.objects.annotate(**related_names(orchestrator="name"))
    serializer_class = serializers.NodeSerializer
    filterset_class = filters.NodeFilter


class WorkloadViewSet(CachedListMixin, viewsets.ReadOnlyModelViewSet):
    queryset = Workload.objects.all()  # narrowed per user in get_queryset
    serializer_class = serializers.WorkloadSerializer
    filterset_class = filters.WorkloadFilter

    def get_queryset(self):
        return access.workloads_visible_to(
            self.request.user, Workload.objects.annotate(**related_names(orchestrator="name", team="slug"))
        )


class QuotaRequestViewSet(VersionETagMixin, CachedListMixin, mixins.CreateModelMixin, viewsets.ReadOnlyModelViewSet):
    """Quota requests of the teams you can see; create submits one; leads and admins decide."""

    queryset = QuotaRequest.objects.all()  # narrowed per user in get_queryset
    serializer_class = serializers.QuotaRequestSerializer
    filterset_class = filters.QuotaRequestFilter
    created: QuotaRequest | None = None  # set by perform_create: the row an idempotency key points to

    def get_queryset(self):
        queryset = (
            QuotaRequest.objects.select_related("team", "orchestrator")
            .defer(*ORCHESTRATOR_JSON)
            .annotate(**related_names(requester="username", decided_by="username"))
        )
        return quota_requests_visible_to(self.request.user, queryset)

    @extend_schema(
        parameters=[IDEMPOTENCY_KEY],
        responses={201: serializers.QuotaRequestSerializer, 200: serializers.QuotaRequestSerializer, 422: None},
    )
    def create(self, request, *args, **kwargs):
        """With an ``Idempotency-Key``, a request sent again gets the first answer (200) instead of a duplicate."""
        key = idempotency_key(request)
        if key is None:
            return super().create(request, *args, **kwargs)
        asked = idempotency.fingerprint(request.method, request.path, request.data)
        try:
            outcome = idempotency.once(request.user, key, asked, lambda: self._create_once(request, *args, **kwargs))
        except idempotency.KeyReused as error:
            return Response({IDEMPOTENCY_HEADER: [str(error)]}, status=status.HTTP_422_UNPROCESSABLE_ENTITY)
        if not outcome.replayed:
            return Response(outcome.response, status=outcome.status_code)
        return Response(outcome.response, status=status.HTTP_200_OK, headers={"Idempotent-Replayed": "true"})

    def _create_once(self, request, *args, **kwargs):
        response = super().create(request, *args, **kwargs)
        return response.status_code, response.data, self.created

    def perform_create(self, serializer):
        data = serializer.validated_data
        self.created = serializer.instance = quota.create_request(
            requester=self.request.user,
            team=data["team"],
            gpus=data["gpus"],
            starts_at=data["starts_at"],
            ends_at=data["ends_at"],
            justification=data["justification"],
            gpu_model=data.get("gpu_model", ""),
            orchestrator=data.get("orchestrator"),
        )

    @extend_schema(request=serializers.DecisionSerializer, responses=serializers.QuotaGrantSerializer)
    @action(detail=True, methods=["post"])
    def approve(self, request, pk=None):
        comment, seen = self._decision(request)
        grant = quota.approve_request(self.get_object().pk, by=request.user, comment=comment, seen_version=seen)
        return Response(serializers.QuotaGrantSerializer(grant).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=serializers.DecisionSerializer, responses=serializers.QuotaRequestSerializer)
    @action(detail=True, methods=["post"])
    def deny(self, request, pk=None):
        comment, seen = self._decision(request)
        denied = quota.deny_request(self.get_object().pk, by=request.user, comment=comment, seen_version=seen)
        return Response(serializers.QuotaRequestSerializer(denied).data)

    @extend_schema(request=serializers.DecisionSerializer, responses=serializers.QuotaRequestSerializer)
    @action(detail=True, methods=["post"])
    def withdraw(self, request, pk=None):
        """The requester takes back a submitted request (``comment``: why, optional)."""
        withdrawn = quota.withdraw_request(self.get_object().pk, by=request.user, reason=self._comment(request))
        return Response(serializers.QuotaRequestSerializer(withdrawn).data)

    @extend_schema(request=serializers.AmendSerializer, responses=serializers.QuotaRequestSerializer)
    @action(detail=True, methods=["post"])
    def amend(self, request, pk=None):
        """The requester corrects a submitted request (GPUs, dates, justification; only the fields sent change)
        with a ``reason``; the history records what changed, who and why, and the deciders are told."""
        body = serializers.AmendSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        changes = {name: value for name, value in body.validated_data.items() if name != "reason"}
        reason = body.validated_data["reason"]
        amended = quota.amend_request(self.get_object().pk, by=request.user, changes=changes, reason=reason)
        return Response(serializers.QuotaRequestSerializer(amended).data)

    @extend_schema(request=serializers.ExtendSerializer, responses={201: serializers.QuotaRequestSerializer})
    @action(detail=True, methods=["post"])
    def extend(self, request, pk=None):
        """The requester asks to keep a live grant's GPUs to a new end: answers the new (submitted) request."""
        body = serializers.ExtendSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        extension = quota.extend_grant(self.get_object().pk, by=request.user, **body.validated_data)
        return Response(serializers.QuotaRequestSerializer(extension).data, status=status.HTTP_201_CREATED)

    @staticmethod
    def _decision(request) -> tuple[str, int | None]:
        """The comment, and the version decided on: If-Match, else the body's ``version``, else unchecked."""
        decision = serializers.DecisionSerializer(data=request.data)
        decision.is_valid(raise_exception=True)
        return decision.validated_data["comment"], seen_version(request, decision.validated_data.get("version"))

    @staticmethod
    def _comment(request) -> str:
        decision = serializers.DecisionSerializer(data=request.data)
        decision.is_valid(raise_exception=True)
        return decision.validated_data["comment"]


class QuotaGrantViewSet(CachedListMixin, viewsets.ReadOnlyModelViewSet):
    queryset = QuotaGrant.objects.all()  # narrowed per user in get_queryset
    serializer_class = serializers.QuotaGrantSerializer
    filterset_class = filters.QuotaGrantFilter

    def get_queryset(self):
        return only_visible(
            QuotaGrant.objects.select_related("team", "orchestrator").defer(*ORCHESTRATOR_JSON), self.request.user
        )

    @extend_schema(request=serializers.ReasonSerializer, responses=serializers.QuotaGrantSerializer)
    @action(detail=True, methods=["post"])
    def revoke(self, request, pk=None):
        body = serializers.ReasonSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        grant = quota.revoke_grant(self.get_object().pk, by=request.user, reason=body.validated_data["reason"])
        return Response(serializers.QuotaGrantSerializer(grant).data)


class UsageSampleViewSet(CachedListMixin, viewsets.ReadOnlyModelViewSet):
    """Raw per-round samples (recent days); rows with no team are an orchestrator's whole pool."""

    queryset = UsageSample.objects.all()  # narrowed per user in get_queryset
    serializer_class = serializers.UsageSampleSerializer
    filterset_class = filters.UsageSampleFilter

    def get_queryset(self):
        rows = UsageSample.objects.annotate(**related_names(orchestrator="name", team="slug")).order_by("-taken_at")
        return pools_or_visible(rows, self.request.user)


class UsageRollupViewSet(CachedListMixin, viewsets.ReadOnlyModelViewSet):
    """Hourly and daily GPU-seconds: averages are gpu_s_* / covered_s."""

    queryset = UsageRollup.objects.all()  # narrowed per user in get_queryset
    serializer_class = serializers.UsageRollupSerializer
    filterset_class = filters.UsageRollupFilter

    def get_queryset(self):
        rows = UsageRollup.objects.annotate(**related_names(orchestrator="name", team="slug"))
        rows = rows.order_by("-period_start")
        return pools_or_visible(rows, self.request.user)


class CollectorRunViewSet(CachedListMixin, viewsets.ReadOnlyModelViewSet):
    queryset = CollectorRun.objects.annotate(**related_names(orchestrator="name"))
    serializer_class = serializers.CollectorRunSerializer
    filterset_class = filters.CollectorRunFilter


class RebalancePlanViewSet(VersionETagMixin, CachedListMixin, viewsets.ReadOnlyModelViewSet):
    queryset = RebalancePlan.objects.prefetch_related("moves__node", "moves__source", "moves__target")
    serializer_class = serializers.RebalancePlanSerializer
    filterset_fields = ["state"]


class ReclaimPlanViewSet(VersionETagMixin, viewsets.ReadOnlyModelViewSet):
    """Reclaims of borrowed GPUs; an admin approves (then applied by a task) or rejects a pending one, as of the
    version it read (``If-Match`` with the plan's ETag, or ``version`` in the body: a plan changed since is 412)."""

    queryset = ReclaimPlan.objects.select_related("orchestrator", "decided_by").defer(*ORCHESTRATOR_JSON)
    serializer_class = serializers.ReclaimPlanSerializer
    filterset_fields = ["state", "mode"]

    def get_queryset(self):
        """The plans touching a team the caller may see (the reclaim page's rule); an outsider's list is empty."""
        return reclaim_reads.plans_visible_to(self.request.user, super().get_queryset())

    @extend_schema(request=serializers.VersionedReasonSerializer, responses=serializers.ReclaimPlanSerializer)
    @action(detail=True, methods=["post"])
    def approve(self, request, pk=None):
        plan = reclaim.approve_reclaim_plan(self.get_object().pk, by=request.user, **versioned_decision(request))
        apply_reclaim_plan.delay(plan.pk)
        return Response(serializers.ReclaimPlanSerializer(plan).data)

    @extend_schema(request=serializers.VersionedReasonSerializer, responses=serializers.ReclaimPlanSerializer)
    @action(detail=True, methods=["post"])
    def reject(self, request, pk=None):
        plan = reclaim.reject_reclaim_plan(self.get_object().pk, by=request.user, **versioned_decision(request))
        return Response(serializers.ReclaimPlanSerializer(plan).data)


class FragmentationView(APIView):
    permission_classes = [IsAuthenticated]

    @extend_schema(responses=serializers.FragmentationSerializer)
    def get(self, request):
        pools = fleet.pools_now()
        total = sum(p.gpus_total for p in pools)
        data = {
            "largest_placeable": {str(k): v for k, v in fleet.largest_gangs_now().items()},
            "gpus_total": total,
            "gpus_free": total - sum(p.gpus_allocated for p in pools),
        }
        return Response(serializers.FragmentationSerializer(data).data)


def health(request):
    """Database, broker, cache and each orchestrator's freshness; 503 when the database or broker is down.
    The broker and cache checks run at once with bounded timeouts (services/health.py).

    Anyone (a load balancer, an uptime probe) gets one word per component; the details (error texts,
    source names, last successes) go to portal admins and to the bearer of METRICS_TOKEN only: an error
    may name hosts, paths or what a server answered."""
    checks = _health_checks()
    healthy = checks["database"] == "ok" and checks["broker"] == "ok" and checks.get("background_ok", True)
    checks.pop("background_ok", None)
    return JsonResponse(
        {
            "status": "ok" if healthy else "error",
            "checks": checks if monitoring_access(request) else _summary(checks),
            "time": timezone.now(),
        },
        status=200 if healthy else 503,
    )


def _health_checks() -> dict[str, object]:
    checks: dict[str, object] = {}
    remote = health_checks.start(
        {
            "database": health_checks.database_status,
            "broker": health_checks.broker_status,
            "cache": health_checks.cache_status,
        }
    )
    checks.update(remote())
    checks["orchestrators"] = {}
    if checks["database"] == "ok":
        now = timezone.now()
        checks["orchestrators"] = {
            o.name: {
                "stale": freshness.source_is_stale(o, now),
                "last_success_at": o.last_success_at,
                "last_error": o.last_error,
            }
            for o in Orchestrator.objects.filter(enabled=True)
        }
        background = freshness.background(now)
        checks.update(worker=background.worker, collector=background.collector, rounds=background.rounds)
        checks["background_ok"] = background.healthy
        checks["api_list_cache"] = list_cache.describe()
    return checks


def _summary(checks: dict) -> dict[str, str]:
    """One word per component, no error text."""
    sources_fresh = checks["database"] == "ok" and not any(o["stale"] for o in checks["orchestrators"].values())
    word = {True: "ok", False: "degraded"}
    background = {
        name: word[checks.get(name, freshness.NOT_SEEN) in ("ok", freshness.NOT_SEEN)]
        for name in ("worker", "collector", "rounds")
    }
    return {
        "database": word[checks["database"] == "ok"],
        "broker": word[checks["broker"] == "ok"],
        "cache": word[checks["cache"] == "ok"],
        "orchestrators": word[sources_fresh],
        **background,
    }


class TokenCreateView(knox_views.LoginView):
    """POST with HTTP basic auth (or a browser session) to get a new token; it is shown once. Repeated
    wrong passwords lock that account out for a while (429 with Retry-After)."""

    authentication_classes = [LockoutAwareBasicAuthentication, SessionAuthentication]
    permission_classes = [IsAuthenticated]

    @extend_schema(request=None, responses=serializers.TokenSerializer)
    def post(self, request, format=None):
        purge_expired_tokens(request.user)  # the per-request check reads only the presented token
        return super().post(request, format=format)


class TokenLogoutView(knox_views.LogoutView):
    """Revoke the token this request was made with."""

    authentication_classes = [SingleQueryTokenAuthentication]

    @extend_schema(request=None, responses={204: None})
    def post(self, request, format=None):
        return super().post(request, format=format)


class TokenLogoutAllView(knox_views.LogoutAllView):
    """Revoke every token of the calling user."""

    authentication_classes = [SingleQueryTokenAuthentication]

    @extend_schema(request=None, responses={204: None})
    def post(self, request, format=None):
        return super().post(request, format=format)
