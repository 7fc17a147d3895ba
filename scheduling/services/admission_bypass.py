""""Admission bypassed" findings: GPU pods in team namespaces that the webhook never answered.

With ``failurePolicy: Ignore`` (the default we recommend) the API server creates a pod unmutated when the portal's
webhook is down or slow: it runs on whatever scheduler it named, outside the pool and without the decision.
The Kubernetes collector lists, per workload, the pods created since the webhook was registered that bear no
decision annotation (``ObservedWorkload.admission_gaps``); after each ingest, every such pod of a known team is
recorded once as an ``AdmissionDecision`` with ``bypassed`` set, next to the webhook's own answers.
"""

from __future__ import annotations

from datetime import UTC, datetime

from scheduling.collectors.snapshot import AdmissionGap, ObservedWorkload, Snapshot
from scheduling.models import AdmissionDecision, Orchestrator

BYPASS_MESSAGE = "admission bypassed: created without the portal's decision while the webhook was registered"


def record_bypasses(orchestrator: Orchestrator, snapshot: Snapshot, team_ids: dict[str, int]) -> int:
    """Record each pod of ``snapshot`` that bypassed admission (once per pod uid); how many are new."""
    found = [(workload, gap) for workload in snapshot.workloads if workload.team in team_ids
             for gap in workload.admission_gaps if gap.uid]
    if not found:
        return 0
    known = set(AdmissionDecision.objects.filter(bypassed=True, uid__in=[gap.uid for _w, gap in found])
                .values_list("uid", flat=True))
    rows = [_finding(orchestrator, workload, gap, team_ids[workload.team]) for workload, gap in found
            if gap.uid not in known]
    AdmissionDecision.objects.bulk_create(rows, ignore_conflicts=True)  # a concurrent round found it too
    return len(rows)


def _finding(orchestrator: Orchestrator, workload: ObservedWorkload, gap: AdmissionGap, team_id: int):
    created = datetime.fromtimestamp(gap.created_at, tz=UTC).isoformat() if gap.created_at else "unknown"
    scheduler = workload.scheduler or "default-scheduler"
    return AdmissionDecision(
        uid=gap.uid[:64], namespace=gap.namespace[:253], name=gap.pod[:253], kind="Pod", team_id=team_id,
        allowed=True, patched=False, scheduler=scheduler[:64], pool=orchestrator.name[:120], bypassed=True,
        message=BYPASS_MESSAGE,
        reasons=[
            f"pod created at {created} with no scheduler.gpuportal.io/decision annotation",
            f"it asked for {scheduler}, not the portal's choice; no nodeSelector for the pool was set",
            "the webhook's rules and selectors send it this pod: it was down or timed out (failurePolicy: Ignore)",
        ],
    )
