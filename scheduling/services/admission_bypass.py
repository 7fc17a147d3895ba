""""Admission bypassed" findings: GPU pods in team namespaces that the webhook never answered.

With ``failurePolicy: Ignore`` (the default we recommend) the API server creates a pod unmutated when the portal's
webhook is down or slow: it runs on whatever scheduler it named, outside the pool and without the decision.
The Kubernetes collector lists, per workload, the pods created since the webhook was registered that bear no
decision annotation (``ObservedWorkload.admission_gaps``); after each ingest, every such pod of a known team is
recorded once as an ``AdmissionDecision`` with ``bypassed`` set, next to the webhook's own answers.
"""

from __future__ import annotations

from datetime import UTC, datetime

from django.db import transaction

from scheduling.collectors.errors import CollectorError
from scheduling.collectors.k8s_admission import BypassActions
from scheduling.collectors.snapshot import AdmissionGap, ObservedWorkload, Snapshot
from scheduling.models import AdmissionDecision, Orchestrator

from . import orchestrators as orchestrator_access

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
    if rows and bypass_action(orchestrator) != "report":
        uids = [row.uid for row in rows]
        transaction.on_commit(lambda: act_on_bypasses(orchestrator.pk, uids))  # no cluster call inside the ingest
    return len(rows)


def bypass_action(orchestrator: Orchestrator) -> str:
    """The admin's per-cluster choice (option ``admission_bypass``): report only (the default), label, or evict."""
    return str(orchestrator_access.option(orchestrator, "admission_bypass", "report"))


def act_on_bypasses(orchestrator_id: int, uids: list[str], actions: BypassActions | None = None) -> int:
    """Label or evict the newly found bypassed pods as the cluster's option says; each finding records what was
    done (or why it could not be). How many pods were acted on."""
    orchestrator = Orchestrator.objects.get(pk=orchestrator_id)
    action = bypass_action(orchestrator)
    if action == "report":
        return 0
    actions = actions or BypassActions(orchestrator_access.kubernetes_api(orchestrator))
    done = 0
    for finding in AdmissionDecision.objects.filter(bypassed=True, uid__in=uids):
        message = f"gpuportal: {BYPASS_MESSAGE} ({orchestrator.name} is set to {action} such pods)"
        try:
            outcome = getattr(actions, action)(finding.namespace, finding.name, message)
            done += 1
        except CollectorError as error:
            outcome = f"{action} failed: {orchestrator_access.masked(str(error), orchestrator)}"
        finding.reasons = [*finding.reasons, f"{orchestrator.name}: {outcome}"]
        finding.save(update_fields=["reasons"])
    return done


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
