"""Who may do what, in one place: (method, path template) -> roles allowed. Used by the API role tests.

Paths take ``{request}`` (a request of nlp, filed by the researcher), ``{queue}`` (research's queue),
``{orchestrator}`` and ``{report}`` (a stored weekly capacity report). "Allowed" means 2xx; a denied
signed-in user gets 403 (or 404 where the object is hidden from them); anonymous gets 401/403.
"""

ROLES = ("anonymous", "outsider", "researcher", "lead", "admin")
SIGNED_IN = ("outsider", "researcher", "lead", "admin")

READS = {
    "/api/v1/teams/": SIGNED_IN,
    "/api/v1/teams/nlp/": ("researcher", "lead", "admin"),
    "/api/v1/queues/": SIGNED_IN,
    "/api/v1/queues/{queue}/history/": ("lead", "admin"),
    "/api/v1/orchestrators/": SIGNED_IN,
    "/api/v1/nodes/": SIGNED_IN,
    "/api/v1/workloads/": SIGNED_IN,
    "/api/v1/quota-requests/": SIGNED_IN,
    "/api/v1/quota-requests/{request}/": ("researcher", "lead", "admin"),
    "/api/v1/grants/": SIGNED_IN,
    "/api/v1/usage/samples/": SIGNED_IN,
    "/api/v1/usage/rollups/": SIGNED_IN,
    "/api/v1/collector-runs/": SIGNED_IN,
    "/api/v1/rebalance-plans/": SIGNED_IN,
    "/api/v1/reclaim-plans/": SIGNED_IN,
    "/api/v1/fragmentation/": SIGNED_IN,
    "/api/v1/reports/": SIGNED_IN,
    "/api/v1/reports/{report}/": SIGNED_IN,
    "/api/v1/reports/{report}/download/csv/": SIGNED_IN,
    "/api/v1/whatif/": SIGNED_IN,  # the list holds only the scenarios each user may read
    "/api/v1/ledger/findings/": SIGNED_IN,
    "/api/v1/ledger/ownership/": SIGNED_IN,
    "/api/v1/ledger/hosts/": SIGNED_IN,
    "/api/v1/ledger/aliases/": SIGNED_IN,
    "/api/v1/group-mappings/": SIGNED_IN,
    "/api/v1/admission/decisions/": SIGNED_IN,  # narrowed to the teams each user may see
    "/api/v1/governance/status/": ("admin",),  # as the Governance page: scheduling.enforce_governance
    "/api/v1/governance/rounds/": ("admin",),
    "/api/v1/governance/drift/": ("admin",),
    "/api/v1/governance/plans/": ("admin",),
}

WRITES = {
    ("post", "/api/v1/queues/"): ("admin",),
    ("patch", "/api/v1/queues/{queue}/"): ("admin",),
    ("post", "/api/v1/orchestrators/"): ("admin",),
    ("patch", "/api/v1/orchestrators/{orchestrator}/"): ("admin",),
    ("post", "/api/v1/quota-requests/"): ("researcher", "lead", "admin"),
    ("post", "/api/v1/quota-requests/{request}/approve/"): ("lead", "admin"),
    ("post", "/api/v1/quota-requests/{request}/deny/"): ("lead", "admin"),
    ("put", "/api/v1/reports/subscription/"): SIGNED_IN,
    ("post", "/api/v1/whatif/"): ("lead", "admin"),
    ("post", "/api/v1/ledger/hosts/"): ("admin",),
    ("post", "/api/v1/ledger/aliases/"): ("admin",),
    ("post", "/api/v1/group-mappings/"): ("admin",),
}
