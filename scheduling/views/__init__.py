"""Thin views: read through selectors, write through services, check permissions with rules."""

from .fairshare import fairshare, fairshare_check, fairshare_history, fairshare_revert
from .fleet import fragmentation, orchestrators, utilisation
from .ledger import ledger
from .overview import overview
from .quota import quota_detail, quota_list, quota_new
from .rebalance import rebalance_overview, rebalance_plan, rebalance_policies
from .teams import team_detail, team_list

__all__ = [
    "fairshare",
    "fairshare_check",
    "fairshare_history",
    "fairshare_revert",
    "fragmentation",
    "ledger",
    "orchestrators",
    "overview",
    "quota_detail",
    "quota_list",
    "quota_new",
    "rebalance_overview",
    "rebalance_plan",
    "rebalance_policies",
    "team_detail",
    "team_list",
    "utilisation",
]
