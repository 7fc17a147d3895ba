"""Governance enforced on the clusters (docs/governance.md): ``intent`` (what each cluster should hold, from the
ORM), ``rounds`` (the round that reads each cluster back, diffs, applies and records), ``decisions`` (what is
recorded and audited, and the admins' decisions on plans and drift). The cluster adapters are
``collectors/governance_clusters.py``.
"""
