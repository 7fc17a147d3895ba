from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularRedocView, SpectacularSwaggerView
from rest_framework.routers import DefaultRouter

from . import ledger, views
from .planning import WhatIfViewSet
from .reports import CapacityReportViewSet, ReportSubscriptionView

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
router.register("reports", CapacityReportViewSet, basename="capacityreport")
router.register("whatif", WhatIfViewSet, basename="whatif")
router.register("ledger/findings", ledger.LedgerFindingViewSet, basename="ledgerfinding")
router.register("ledger/ownership", ledger.OwnershipIntervalViewSet, basename="ownershipinterval")
router.register("ledger/hosts", ledger.FleetHostViewSet, basename="fleethost")
router.register("ledger/aliases", ledger.NodeAliasViewSet, basename="nodealias")

urlpatterns = [
    # Before the router, whose reports/<pk>/ would otherwise take "subscription" for an id.
    path("v1/reports/subscription/", ReportSubscriptionView.as_view(), name="report-subscription-api"),
    path("v1/", include(router.urls)),
    path("v1/fragmentation/", views.FragmentationView.as_view(), name="fragmentation"),
    path("v1/auth/tokens/", views.TokenCreateView.as_view(), name="token-create"),
    path("v1/auth/logout/", views.TokenLogoutView.as_view(), name="token-logout"),
    path("v1/auth/logout-all/", views.TokenLogoutAllView.as_view(), name="token-logout-all"),
    path("schema/", SpectacularAPIView.as_view(), name="api-schema"),
    path("docs/", SpectacularSwaggerView.as_view(url_name="api-schema"), name="api-docs"),
    path("redoc/", SpectacularRedocView.as_view(url_name="api-schema"), name="api-redoc"),
]
