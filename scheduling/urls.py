from django.urls import path

from . import views

urlpatterns = [
    path("", views.overview, name="overview"),
    path("workloads/mine/", views.my_workloads, name="my-workloads"),
    path("teams/", views.team_list, name="team-list"),
    path("teams/<slug:slug>/", views.team_detail, name="team-detail"),
    path("fragmentation/", views.fragmentation, name="fragmentation"),
    path("utilisation/", views.utilisation, name="utilisation"),
    path("quota/", views.quota_list, name="quota-list"),
    path("quota/new/", views.quota_new, name="quota-new"),
    path("quota/<int:pk>/", views.quota_detail, name="quota-detail"),
    path("fairshare/", views.fairshare, name="fairshare"),
    path("fairshare/check/", views.fairshare_check, name="fairshare-check"),
    path("fairshare/history/", views.fairshare_history, name="fairshare-history"),
    path("fairshare/history/<int:history_id>/revert/", views.fairshare_revert, name="fairshare-revert"),
    path("orchestrators/", views.orchestrators, name="orchestrators"),
    path("ledger/", views.ledger, name="ledger"),
    path("rebalance/", views.rebalance_overview, name="rebalance"),
    path("rebalance/<int:pk>/", views.rebalance_plan, name="rebalance-plan"),
    path("rebalance/policies/", views.rebalance_policies, name="rebalance-policies"),
    path("rebalance/policies/<int:pk>/", views.rebalance_policies, name="rebalance-policy"),
    path("reports/", views.report_list, name="report-list"),
    path("reports/subscription/", views.report_subscription, name="report-subscription"),
    path("reports/build/", views.report_build, name="report-build"),
    path("reports/<int:pk>/", views.report_detail, name="report-detail"),
    path("reports/<int:pk>/<str:fmt>/", views.report_download, name="report-download"),
    path("forecast/", views.forecast_page, name="forecast"),
    path("whatif/", views.whatif_list, name="whatif"),
    path("whatif/<int:pk>/", views.whatif_detail, name="whatif-detail"),
    path("whatif/<int:pk>/status/", views.whatif_status, name="whatif-status"),
]
