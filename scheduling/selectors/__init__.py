"""ORM -> plain data and engine types: what pages, reports, services and the engine read.

One module per subject, mirroring services/: fleet (nodes, pools), teams (standing), policies
(entitlements, queue history), usage (series, GPU-hours, waits), fragmentation (now) and fragmentation_trend
(over time), busy (measured GPU utilisation), ledger, planning (history for forecasts and what-ifs),
report (the weekly capacity report's reads), rebalance (its inputs) and pool_policies (the rules in force).
access answers who may see what, for all of them.
"""
