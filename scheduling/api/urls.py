from functools import wraps

from csp import constants as csp
from csp.decorators import csp_replace
from django.conf import settings
from django.contrib.auth.views import redirect_to_login
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularRedocView, SpectacularSwaggerSplitView
from rest_framework.routers import DefaultRouter

from . import admission_log, governance, identity, ledger, views
from .planning import WhatIfViewSet
from .reports import CapacityReportViewSet, ReportSubscriptionView
from .routing import RouteView
from .usage import TeamUsersView, UserJobsView


def docs_page(view):
    """A browser that is not signed in is sent to sign in first, not shown a bare 403."""

    @wraps(view)
    def page(request, *args, **kwargs):
        if not (settings.GPUPORTAL_PUBLIC_API_DOCS or request.user.is_authenticated):
            return redirect_to_login(request.get_full_path())
        return view(request, *args, **kwargs)

    return page


router = DefaultRouter()
router.register("teams", views.TeamViewSet, basename="team")
router.register("queues", views.QueueViewSet, basename="queue")
router.register("orchestrators", views.OrchestratorViewSet, basename="orchestrator")
router.register("nodes", views.NodeViewSet, basename="node")
router.register("workloads", views.WorkloadViewSet, basename="workload")
router.register("quota-requests", views.QuotaRequestViewSet, basename="quotarequest")
router.register("grants", views.QuotaGrantViewSet, basename="grant")
router.register("usage/samples", views.UsageSampleViewSet, basename="usagesample")
router.register("usage/rollups", views.UsageRollupViewSet, basename="usagerollup")
router.register("collector-runs", views.CollectorRunViewSet, basename="collectorrun")
router.register("rebalance-plans", views.RebalancePlanViewSet, basename="rebalanceplan")
router.register("reclaim-plans", views.ReclaimPlanViewSet, basename="reclaimplan")
router.register("reports", CapacityReportViewSet, basename="capacityreport")
router.register("whatif", WhatIfViewSet, basename="whatif")
router.register("ledger/findings", ledger.LedgerFindingViewSet, basename="ledgerfinding")
router.register("ledger/ownership", ledger.OwnershipIntervalViewSet, basename="ownershipinterval")
router.register("ledger/hosts", ledger.FleetHostViewSet, basename="fleethost")
router.register("ledger/aliases", ledger.NodeAliasViewSet, basename="nodealias")
router.register("admission/decisions", admission_log.AdmissionDecisionViewSet, basename="admissiondecision")
router.register("governance/rounds", governance.RoundViewSet, basename="governanceround")
router.register("governance/drift", governance.DriftViewSet, basename="driftfinding")
router.register("governance/plans", governance.PlanViewSet, basename="enforcementplan")
router.register("group-mappings", identity.GroupMappingViewSet, basename="groupmapping")
router.register("identity-overrides", identity.IdentityOverrideViewSet, basename="identityoverride")

urlpatterns = [
    # Before the router, whose reports/<pk>/ would otherwise take "subscription" for an id.
    path("v1/reports/subscription/", ReportSubscriptionView.as_view(), name="report-subscription-api"),
    # Before the router, whose usage/ prefixes would otherwise take these paths.
    path("v1/usage/teams/<slug:slug>/users/", TeamUsersView.as_view(), name="usage-team-users"),
    path("v1/usage/teams/<slug:slug>/users/<str:user>/jobs/", UserJobsView.as_view(), name="usage-user-jobs"),
    path("v1/governance/status/", governance.GovernanceStatusView.as_view(), name="governance-status"),
    path("v1/", include(router.urls)),
    path("v1/fragmentation/", views.FragmentationView.as_view(), name="fragmentation"),
    path("v1/route", RouteView.as_view(), name="route"),
    path("v1/auth/tokens/", views.TokenCreateView.as_view(), name="token-create"),
    path("v1/auth/logout/", views.TokenLogoutView.as_view(), name="token-logout"),
    path("v1/auth/logout-all/", views.TokenLogoutAllView.as_view(), name="token-logout-all"),
    # Schema, Swagger UI and Redoc need a signed-in user unless GPUPORTAL_PUBLIC_API_DOCS (ApiDocsAccess).
    path("schema/", SpectacularAPIView.as_view(), name="api-schema"),
    # The split view serves its start-up script as a file: the Content-Security-Policy allows no inline script.
    path(
        "docs/",
        docs_page(SpectacularSwaggerSplitView.as_view(url_name="api-schema", template_name="api/swagger_ui.html")),
        name="api-docs",
    ),
    # Redoc's bundle writes its styles as <style> elements (styled-components) and searches in a blob: worker.
    path(
        "redoc/",
        csp_replace({"style-src-elem": [csp.SELF, csp.UNSAFE_INLINE], "worker-src": [csp.SELF, "blob:"]})(
            docs_page(SpectacularRedocView.as_view(url_name="api-schema", template_name="api/redoc.html"))
        ),
        name="api-redoc",
    ),
]
