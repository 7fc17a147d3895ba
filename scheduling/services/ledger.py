"""The GPU ledger's writes: each source's view (per scrape), then one evaluation per round.

``record_views`` runs inside ``ingest_snapshot``'s transaction, so a source's views change exactly when
its nodes do. ``evaluate`` runs after every scrape and every demo round: under a row lock on the single
``LedgerRound`` row (two workers finishing scrapes at once take turns), it feeds the inventory, the
views, the open plan steps and the findings on record to the pure engine (``engine/ledger.py``) and
writes what it returns - opened, updated, closed findings and ownership intervals - in one transaction.
An email to the admins goes out after the commit when a double ownership opens.
"""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from scheduling.collectors.conditions import condition_of, takes_work
from scheduling.collectors.k8s import blocking_taints
from scheduling.collectors.snapshot import NodeCondition, ObservedNode, Snapshot, WorkloadState
from scheduling.engine import ledger as engine
from scheduling.models import (
    FleetHost,
    LedgerFinding,
    LedgerRound,
    Node,
    NodeAlias,
    NodeMove,
    Orchestrator,
    OwnershipInterval,
    RebalancePlan,
    SourceView,
    Workload,
    node_key,
)
from scheduling.selectors.rebalance import rebalance_settings

from .audit import save_audited
from .bulk import chunks
from .notifications import double_ownership_opened

log = logging.getLogger(__name__)

DEFAULTS = {
    "orphan_after_s": 900.0,  # owned by none this long before it is a finding
    "phantom_after_s": 120.0,  # an allocation with no workload behind it this long (scrape races settle)
    "phantom_min_gpus": 1.0,
    "stale_after_s": 300.0,  # a source whose last good scrape is older is unknown, not empty
}


def ledger_settings() -> dict:
    return {**DEFAULTS, **getattr(settings, "GPUPORTAL_LEDGER", {})}


def engine_config() -> engine.LedgerConfig:
    values = ledger_settings()
    return engine.LedgerConfig(
        orphan_after_s=float(values["orphan_after_s"]),
        phantom_after_s=float(values["phantom_after_s"]),
        phantom_min_gpus=float(values["phantom_min_gpus"]),
    )


def _epoch(moment: datetime) -> float:
    return moment.timestamp()


def _aware(epoch: float) -> datetime:
    return datetime.fromtimestamp(epoch, tz=UTC)


# ---------------------------------------------------------------------------------------- source views


def schedulable_in(kind: str, node: ObservedNode, partitions_reported: bool) -> tuple[bool, str]:
    """May this orchestrator place GPU work on the node now, and if not, why (the issue's rule per kind).

    Slurm: in a partition and not drained/down. Kubernetes: Ready, not cordoned, no NoSchedule/NoExecute
    taint the GPU work does not tolerate (the collector's ``schedulable``). Ray: alive with GPUs.
    """
    if node.gpu_total <= 0:
        return False, "reports no GPUs"
    if kind == Orchestrator.Kind.SLURM and partitions_reported and not node.partitions:
        return False, "in no partition"
    if takes_work(node):
        return True, ""
    return False, _why_not(kind, node)


def _why_not(kind: str, node: ObservedNode) -> str:
    if kind == Orchestrator.Kind.KUBERNETES:
        if condition_of(node) in (NodeCondition.NOT_READY, NodeCondition.UNKNOWN, NodeCondition.DOWN):
            return f"not Ready ({node.reason or node.state})"[:300]
        if node.cordoned:
            return "cordoned"
        blocking = [f"{t.key}={t.value}:{t.effect}" for t in blocking_taints(node.taints)]
        return f"tainted {', '.join(blocking)}"[:300] if blocking else "unschedulable"
    if kind == Orchestrator.Kind.RAY:
        return f"{node.state or 'not alive'}"
    flags = "+".join(node.state_flags)
    reason = f" ({node.reason})" if node.reason else ""
    return f"{node.state}{'+' + flags if flags else ''}{reason}"[:300]


def _backed_gpus(snapshot: Snapshot, kind: str) -> dict[str, float] | None:
    """GPUs the running workloads hold per node; ``None`` where the source cannot say (Ray's task
    listings are capped and fractional, so a sum of them is no evidence of a leak)."""
    if kind == Orchestrator.Kind.RAY:
        return None
    backed: dict[str, float] = defaultdict(float)
    for workload in snapshot.workloads:
        if workload.state is WorkloadState.RUNNING and workload.nodes:
            share = workload.gpus / len(workload.nodes)
            for name in workload.nodes:
                backed[name] += share
    return backed


def record_views(orchestrator: Orchestrator, snapshot: Snapshot) -> int:
    """Replace the source's views with this good scrape's (a node it stopped listing is no longer its)."""
    partitions_reported = any(n.partitions for n in snapshot.nodes)
    backed = _backed_gpus(snapshot, orchestrator.kind)
    rows = []
    for node in snapshot.nodes:
        schedulable, why_not = schedulable_in(orchestrator.kind, node, partitions_reported)
        rows.append(
            SourceView(
                orchestrator=orchestrator,
                name=node.name,
                schedulable=schedulable,
                state=(node.state or "")[:120],
                why_not=why_not,
                gpu_total=node.gpu_total,
                gpu_allocated=node.gpu_allocated,
                gpu_backed=None if backed is None else round(backed.get(node.name, 0.0), 3),
                seen_at=snapshot.taken_at,
            )
        )
    _replace_views(orchestrator, rows)
    return len(rows)


WRITTEN_VIEW_FIELDS = ("name", "schedulable", "state", "why_not", "gpu_total", "gpu_allocated", "gpu_backed")


def _replace_views(orchestrator: Orchestrator, rows: list[SourceView]) -> None:
    """Only the views that changed are rewritten; the rest get the round's ``seen_at`` in one UPDATE. Deleting
    and inserting all 5,000 views of a large cluster each round cost ~0.9 s of a 30-second round's CPU."""
    stored = SourceView.objects.filter(orchestrator=orchestrator)
    was = {values[0]: values for values in stored.values_list(*WRITTEN_VIEW_FIELDS)}
    fresh = [row for row in rows if was.pop(row.name, None) != tuple(getattr(row, f) for f in WRITTEN_VIEW_FIELDS)]
    stale = [*was, *(row.name for row in fresh)]  # no longer listed, or listed otherwise
    for chunk in chunks(stale):
        stored.filter(name__in=chunk).delete()
    if rows:
        stored.update(seen_at=rows[0].seen_at)
    SourceView.objects.bulk_create(fresh, batch_size=2000)


def record_demo_views(orchestrators: Iterable[Orchestrator], now: datetime) -> None:
    """The demo federation's orchestrators are the Node rows: each sees exactly the nodes it owns."""
    backed: dict[str, float] = defaultdict(float)
    running = Workload.objects.filter(orchestrator__in=orchestrators, state=Workload.State.RUNNING)
    for assignments in running.values_list("nodes", flat=True):
        for item in assignments or ():
            if isinstance(item, dict):
                backed[str(item.get("node", ""))] += len(item.get("gpus") or ())
    nodes_of: dict[int, list[Node]] = defaultdict(list)
    for node in Node.objects.filter(orchestrator__in=orchestrators):
        nodes_of[node.orchestrator_id].append(node)
    for orchestrator in orchestrators:
        rows = [
            SourceView(
                orchestrator=orchestrator,
                name=node.name,
                schedulable=node.state not in Node.UNSCHEDULABLE and node.gpu_total > 0,
                state=node.state,
                why_not=node.state if node.state in Node.UNSCHEDULABLE else "",
                gpu_total=node.gpu_total,
                gpu_allocated=node.gpu_allocated,
                gpu_backed=backed.get(node.name, 0.0),
                seen_at=now,
            )
            for node in nodes_of[orchestrator.pk]
        ]
        _replace_views(orchestrator, rows)


# ------------------------------------------------------------------------------------------- inputs


def _hosts() -> list[engine.Host]:
    recorded = {n.key: n for n in Node.objects.select_related("orchestrator")}
    expected = _expected_owners()
    hosts = []
    for host in FleetHost.objects.all():
        node = recorded.get(host.name)
        owner, because = expected.get(host.name, (node.orchestrator.name if node else "", "its recorded owner"))
        hosts.append(
            engine.Host(
                name=host.name,
                gpu_total=host.gpu_total,
                gpu_uuids=frozenset(str(u) for u in host.gpu_uuids or ()),
                pinned_to=node.orchestrator.name if node is not None and node.pinned else "",
                expected_owner=owner,
                expected_because=because if owner else "",
                retired=host.retired,
            )
        )
    return hosts


def _expected_owners() -> dict[str, tuple[str, str]]:
    """Host -> (target, why) of the latest applied plan that moved it."""
    moves = (
        NodeMove.objects.filter(state=NodeMove.State.MOVED, plan__state=RebalancePlan.State.APPLIED)
        .order_by("updated_at")
        .values_list("node__domain", "node__name", "target__name", "plan_id")
    )
    return {node_key(domain, name): (target, f"plan #{plan} applied") for domain, name, target, plan in moves}


def _aliases() -> list[engine.Alias]:
    rows = NodeAlias.objects.values_list("orchestrator__name", "name", "host__name")
    return [engine.Alias(orchestrator, name, host) for orchestrator, name, host in rows]


def _is_fresh(orchestrator: Orchestrator, now: datetime) -> bool:
    horizon = now - timedelta(seconds=float(ledger_settings()["stale_after_s"]))
    return (
        not orchestrator.is_stale
        and orchestrator.last_success_at is not None
        and orchestrator.last_success_at >= horizon
    )


VIEW_FIELDS = ("orchestrator_id", "name", "schedulable", "gpu_total", "gpu_allocated", "gpu_backed", "state", "why_not")


def _sources(now: datetime) -> list[engine.Source]:
    orchestrators = list(Orchestrator.objects.filter(enabled=True, kind__in=Orchestrator.SCHEDULER_KINDS))
    views: dict[int, list[engine.SourceView]] = defaultdict(list)
    names = {o.pk: o.name for o in orchestrators}
    # A source names its nodes bare; outside the shared domain they are other machines than the same names there.
    domains = {o.pk: o.node_domain for o in orchestrators}
    rows = SourceView.objects.filter(orchestrator__in=orchestrators).values_list(*VIEW_FIELDS, "gpu_uuids")
    for orch_id, name, schedulable, total, allocated, backed, state, why_not, uuids in rows.iterator(chunk_size=5000):
        views[orch_id].append(
            engine.SourceView(
                orchestrator=names[orch_id],
                name=node_key(domains[orch_id], name),
                schedulable=schedulable,
                gpu_total=total,
                gpu_allocated=allocated,
                gpu_backed=backed,
                state=state,
                why_not=why_not,
                gpu_uuids=frozenset(str(u) for u in uuids) if uuids else frozenset(),
            )
        )
    return [
        engine.Source(
            name=o.name,
            kind=o.kind,
            fresh=_is_fresh(o, now),
            views=tuple(views[o.pk]),
            has_data=o.last_success_at is not None,
        )
        for o in orchestrators
    ]


def _steps() -> list[engine.PlanStep]:
    timeout = float(rebalance_settings()["drain_timeout_s"])
    open_plans = (RebalancePlan.State.APPROVED, RebalancePlan.State.APPLYING)
    waiting = (NodeMove.State.PENDING, NodeMove.State.DRAINING, NodeMove.State.MOVED)
    moves = NodeMove.objects.filter(plan__state__in=open_plans, plan__dry_run=False, state__in=waiting)
    return [
        engine.PlanStep(
            move_id=pk,
            plan_id=plan_id,
            node=node_key(domain, node),
            source=source,
            target=target,
            state=state,
            since=_epoch(since),
            timeout_s=timeout,
        )
        for pk, plan_id, domain, node, source, target, state, since in moves.values_list(
            "pk", "plan_id", "node__domain", "node__name", "source__name", "target__name", "state", "updated_at"
        )
    ]


def _on_record(rows: Iterable[LedgerFinding]) -> list[engine.Finding]:
    return [
        engine.Finding(
            key=row.key,
            kind=engine.FindingKind(row.kind),
            severity=engine.Severity(row.severity),
            node=row.node,
            orchestrators=row.orchestrator_names,
            explanation=row.explanation,
            first_seen=_epoch(row.first_seen),
            last_seen=_epoch(row.last_seen),
            opened_at=_epoch(row.opened_at) if row.opened_at else None,
        )
        for row in rows
    ]


# ------------------------------------------------------------------------------------------ evaluate


@dataclass(frozen=True)
class LedgerOutcome:
    opened: tuple[str, ...]
    closed: tuple[str, ...]
    open_total: int
    stale_sources: tuple[str, ...]
    duration_ms: int


def evaluate(now: datetime | None = None, *, wait: bool = True) -> LedgerOutcome | None:
    """One ledger round over every source's latest views; findings and intervals written atomically. With
    ``wait=False``, None at once when another evaluation holds the round's lock (PostgreSQL; elsewhere it waits)."""
    now = now or timezone.now()
    started = time.perf_counter()
    with transaction.atomic():
        round_row = _lock_round(wait)
        if round_row is None:
            return None
        detection = engine.detect(_hosts(), _aliases(), _sources(now), _steps(), _epoch(now), engine_config())
        live = {row.key: row for row in LedgerFinding.objects.select_for_update().filter(closed_at__isnull=True)}
        result = engine.reconcile(_on_record(live.values()), detection, _epoch(now))
        _persist_findings(live, result, now)
        _persist_ownership(detection, now)
        duration = round((time.perf_counter() - started) * 1000)
        round_row.evaluated_at, round_row.duration_ms = now, duration
        round_row.hosts, round_row.stale_sources = len(detection.ownership), ",".join(sorted(detection.stale_sources))
        round_row.save()
        doubles = [key for key in result.newly_open if key.startswith(f"{engine.FindingKind.DOUBLE_OWNERSHIP}:")]
        if doubles:
            transaction.on_commit(lambda: _alert_double_ownership(doubles))
    open_total = LedgerFinding.objects.filter(closed_at__isnull=True, opened_at__isnull=False).count()
    return LedgerOutcome(result.newly_open, result.closed, open_total, tuple(sorted(detection.stale_sources)), duration)


def evaluate_quietly(now: datetime | None = None) -> LedgerOutcome | None:
    """For the collection paths: a ledger fault is logged, never allowed to fail the scrape that ran."""
    try:
        return evaluate(now)
    except Exception:  # the scrape's own data is already committed; the next round evaluates again
        log.exception("ledger evaluation failed")
        return None


AFTER_SCRAPE_REPEATS = 5


def evaluate_after_scrape() -> LedgerOutcome | None:
    """After a scrape committed (quietly, like ``evaluate_quietly``): evaluate, unless another evaluation is under
    way. Many clusters' scrapes end together, and each evaluating in turn was most of a round's CPU and kept
    parallel scrapes waiting on the lock (docs/performance.md, "Many clusters"). Nothing is missed: a scrape
    commits before it looks at the lock, and the evaluation holding it reads every source's last attempt again
    once it has committed, evaluating again (up to ``AFTER_SCRAPE_REPEATS`` times) when one changed meanwhile."""
    outcome = None
    try:
        for _ in range(AFTER_SCRAPE_REPEATS):
            before = _attempts()
            outcome = evaluate(wait=False)
            if outcome is None or _attempts() == before:
                return outcome
    except Exception:  # as in evaluate_quietly
        log.exception("ledger evaluation failed")
    return outcome


def _attempts() -> list[tuple]:
    """Each source's latest scrape, good or failed: what an evaluation reads changes only with these."""
    rows = Orchestrator.objects.order_by("pk")
    return list(rows.values_list("pk", "enabled", "last_success_at", "last_error_at"))


def _lock_round(wait: bool = True) -> LedgerRound | None:
    LedgerRound.objects.get_or_create(pk=1)
    return LedgerRound.objects.select_for_update(skip_locked=not wait).filter(pk=1).first()


def _persist_findings(live: dict[str, LedgerFinding], result: engine.Reconciliation, now: datetime) -> None:
    created, changed = [], []
    for finding in result.upserts:
        row = live.get(finding.key) or LedgerFinding(key=finding.key, first_seen=_aware(finding.first_seen))
        row.kind, row.severity, row.node = finding.kind.value, finding.severity.value, finding.node[:200]
        row.orchestrators = ",".join(finding.orchestrators)[:300]
        row.explanation, row.last_seen = finding.explanation, _aware(finding.last_seen)
        row.opened_at = _aware(finding.opened_at) if finding.opened_at is not None else None
        (changed if row.pk else created).append(row)
    fields = ["kind", "severity", "node", "orchestrators", "explanation", "last_seen", "opened_at"]
    LedgerFinding.objects.bulk_update(changed, fields, batch_size=1000)
    LedgerFinding.objects.bulk_create(created, batch_size=1000)
    LedgerFinding.objects.filter(pk__in=[live[k].pk for k in result.closed]).update(closed_at=now)
    LedgerFinding.objects.filter(pk__in=[live[k].pk for k in result.discarded]).delete()


def _persist_ownership(detection: engine.Detection, now: datetime) -> None:
    ids = dict(Orchestrator.objects.values_list("name", "pk"))
    names = {pk: name for name, pk in ids.items()}
    open_rows = list(
        OwnershipInterval.objects.filter(ended_at__isnull=True).values_list("pk", "node", "orchestrator_id")
    )
    pairs = {(node, names[orch]): pk for pk, node, orch in open_rows if orch in names}
    to_open, to_close = engine.ownership_changes(pairs, detection)
    OwnershipInterval.objects.filter(pk__in=[pairs[p] for p in to_close]).update(ended_at=now)
    OwnershipInterval.objects.bulk_create(
        [OwnershipInterval(node=node[:200], orchestrator_id=ids[o], started_at=now) for node, o in sorted(to_open)],
        batch_size=2000,
    )


def _alert_double_ownership(keys: list[str]) -> None:
    findings = list(LedgerFinding.objects.filter(key__in=keys, closed_at__isnull=True))
    if findings:
        double_ownership_opened(findings)


# ----------------------------------------------------------------------------------------- inventory


@transaction.atomic
def adopt_hosts(*, by=None, reason: str = "adopted from what the orchestrators report") -> list[FleetHost]:
    """Add every GPU node a source lists (in its last good views) that no inventory host matches, with
    the most GPUs any source reports for it. For a first install; after that, hosts are added on purpose
    so that unknown nodes stand out."""
    identity = engine.Identity(_hosts(), _aliases())
    seen: dict[str, SourceView] = {}
    for view in SourceView.objects.select_related("orchestrator").filter(gpu_total__gt=0):
        key = node_key(view.orchestrator.node_domain, view.name)
        probe = engine.SourceView(view.orchestrator.name, key, view.schedulable, view.gpu_total)
        if identity.resolve(probe) is None:
            best = seen.get(key)
            if best is None or view.gpu_total > best.gpu_total:
                seen[key] = view
    models = {node_key(domain, name): model for domain, name, model in Node.objects.values_list(
        "domain", "name", "gpu_model")}
    adopted = []
    for name, view in sorted(seen.items()):
        host = FleetHost(name=name, gpu_total=view.gpu_total, gpu_model=models.get(name, ""))
        save_audited(host, by=by, reason=reason)
        adopted.append(host)
    return adopted


def save_inventory_row(row: FleetHost | NodeAlias, *, by, reason: str) -> FleetHost | NodeAlias:
    """An admin's change of the inventory or an alias: validated, saved with author and reason; the
    next evaluation joins views with it."""
    save_audited(row, by=by, reason=reason)
    return row
