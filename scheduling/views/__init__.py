"""Thin views: read through selectors, write through services, check permissions with rules."""

from .audit import audit_log
from .drilldown import team_users as usage_team
from .drilldown import user_jobs as usage_user
from .drilldown import workload_act, workload_detail
from .fairshare import fairshare, fairshare_check, fairshare_history, fairshare_revert
from .finished import finished_workloads
from .fleet import fragmentation, orchestrators, utilisation
from .governance import governance
from .inbox import chat_webhooks_page, inbox_mark, inbox_mark_all, inbox_page
from .ledger import ledger
from .nodes import node_detail
from .overview import overview
from .planning import forecast_page, whatif_detail, whatif_list, whatif_status
from .quota import quota_detail, quota_list, quota_new
from .rebalance import rebalance_overview, rebalance_plan, rebalance_policies
from .reclaim import reclaim_decide, reclaim_plans
from .reports import report_build, report_detail, report_download, report_list, report_subscription
from .teams import team_detail, team_list
from .workloads import my_workloads

__all__ = [
    "audit_log",
    "chat_webhooks_page",
    "fairshare",
    "fairshare_check",
    "fairshare_history",
    "fairshare_revert",
    "finished_workloads",
    "forecast_page",
    "fragmentation",
    "governance",
    "inbox_mark",
    "inbox_mark_all",
    "inbox_page",
    "ledger",
    "my_workloads",
    "node_detail",
    "orchestrators",
    "overview",
    "quota_detail",
    "quota_list",
    "quota_new",
    "rebalance_overview",
    "rebalance_plan",
    "rebalance_policies",
    "reclaim_decide",
    "reclaim_plans",
    "report_build",
    "report_detail",
    "report_download",
    "report_list",
    "report_subscription",
    "team_detail",
    "team_list",
    "usage_team",
    "usage_user",
    "utilisation",
    "whatif_detail",
    "whatif_list",
    "whatif_status",
    "workload_act",
    "workload_detail",
]
