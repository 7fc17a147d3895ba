"""Build the demo federation in the database and run its rounds (state lives in the DB only)."""

from collections import defaultdict
from datetime import UTC, datetime, timedelta
from decimal import Decimal

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone

from scheduling.demo import fleet, trace
from scheduling.demo.stepper import FederationState, RoundResult, RunningJob, advance
from scheduling.engine.types import MemberAssignment
from scheduling.models import (
    CollectorRun,
    FleetHost,
    Membership,
    Node,
    Orchestrator,
    Queue,
    QuotaRequest,
    Team,
    UsageSample,
    Workload,
)
from scheduling.models.fleet import DEMO_PREFIX
from scheduling.selectors.engine_inputs import engine_nodes

from . import entitlement_split, quota
from .enforcement.intent import governance_input
from .ledger import evaluate_quietly, record_demo_views
from .metrics import refresh_rollups

DEMO_USERS = (  # username, password, team, role, staff
    ("admin", "admin", None, None, True),
    ("lead", "lead", "research", Membership.Role.LEAD, False),
    ("alice", "alice", "nlp", Membership.Role.RESEARCHER, False),
    ("bob", "bob", "inference", Membership.Role.RESEARCHER, False),
)


def speedup() -> float:
    return float(getattr(settings, "GPUPORTAL_DEMO_SPEEDUP", 6.0))


def _epoch(moment: datetime) -> float:
    return moment.timestamp()


def _aware(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, tz=UTC)


@transaction.atomic
def create_demo_federation() -> None:
    """Users, teams with entitlements, three orchestrators and their 40 nodes (idempotent)."""
    teams: dict[str, Team] = {}
    for slug, name, parent, _weight, _guaranteed, _burst in fleet.TEAMS:
        teams[slug], _ = Team.objects.get_or_create(slug=slug, defaults={"name": name, "parent": teams.get(parent)})
    for orch in fleet.ORCHESTRATORS:
        Orchestrator.objects.get_or_create(
            name=orch.name, defaults={"kind": orch.kind, "endpoint": f"{DEMO_PREFIX}{orch.name}"}
        )
    owners = {o.name: o for o in Orchestrator.objects.all()}
    for spec in fleet.node_layout():
        Node.objects.get_or_create(
            domain="", name=spec["name"], defaults={**spec, "orchestrator": owners[spec["orchestrator"]]}
        )
        FleetHost.objects.get_or_create(  # the ledger's inventory: the demo's physical hosts
            name=spec["name"], defaults={"gpu_total": spec["gpu_total"], "gpu_model": spec.get("gpu_model", "")}
        )
    for slug, _name, _parent, weight, guaranteed, burst in fleet.TEAMS:
        Queue.objects.get_or_create(
            team=teams[slug],
            gpu_model="",
            defaults={"weight": Decimal(weight), "guaranteed": guaranteed, "burst_limit": burst},
        )
    _create_users(teams)


def _create_users(teams: dict[str, Team]) -> None:
    users = get_user_model().objects
    for username, password, team, role, staff in DEMO_USERS:
        if users.filter(username=username).exists():
            continue
        user = users.create_user(username=username, password=password, is_staff=staff, is_superuser=staff)
        if team:
            Membership.objects.create(user=user, team=teams[team], role=role)


def seed_quota_requests(now: datetime | None = None) -> int:
    """Two requests through the real services, so the quota pages show both flows at once: alice's waits for a
    decision; bob's was approved and ends within the reminder lead time (the extend form and the reminder).
    Only into a demo that has none, so a second setup adds nothing."""
    if QuotaRequest.objects.exists():
        return 0
    users = {user.username: user for user in get_user_model().objects.filter(username__in=("admin", "alice", "bob"))}
    teams = {team.slug: team for team in Team.objects.filter(slug__in=("nlp", "inference"))}
    now = now or timezone.now()
    quota.create_request(
        requester=users["alice"],
        team=teams["nlp"],
        gpus=8,
        gpu_model="H100",
        starts_at=now + timedelta(days=3),
        ends_at=now + timedelta(days=17),
        justification="Two weeks of ablations for the long-context paper before the deadline.",
    )
    granted = quota.create_request(
        requester=users["bob"],
        team=teams["inference"],
        gpus=8,
        starts_at=now + timedelta(hours=1),
        ends_at=now + timedelta(days=5),
        justification="Load test of the new serving stack at twice today's traffic.",
    )
    quota.approve_request(granted.pk, by=users["admin"], comment="Fits: the fleet has headroom this week.")
    return 2


def demo_orchestrators():
    return Orchestrator.objects.filter(endpoint__startswith=DEMO_PREFIX, enabled=True)


def load_state() -> FederationState:
    orchestrators = list(demo_orchestrators())
    state = FederationState(nodes=engine_nodes(Node.objects.filter(orchestrator__in=orchestrators)))
    active = Workload.objects.filter(orchestrator__in=orchestrators, state__in=Workload.ACTIVE_STATES)
    for row in active.select_related("orchestrator", "team"):
        job = _job_of(row)
        if row.state == Workload.State.RUNNING:
            assignments = tuple(
                MemberAssignment(member=i, node=a["node"], gpu_indices=tuple(a["gpus"]))
                for i, a in enumerate(row.nodes)
            )
            state.running.append(RunningJob(job, _epoch(row.started_at), assignments))
        else:
            state.pending.append(job)
            state.pending_reasons[job.external_id] = row.pending_reason
    return state


def _job_of(row: Workload) -> trace.DemoJob:
    return trace.DemoJob(
        external_id=row.external_id,
        orchestrator=row.orchestrator.name,
        team=row.team.slug if row.team else "",
        user=row.user,
        kind=row.kind,
        gang_size=row.gang_size,
        gpus_per_member=row.gpus_per_member,
        submitted_at=_epoch(row.submitted_at),
        duration_s=float(row.duration_estimate_s),
    )


def run_demo_round(now: datetime | None = None) -> RoundResult | None:
    """One live round: arrivals since the last round, engine placement, persisted with samples."""
    now = now or timezone.now()
    orchestrators = list(demo_orchestrators())
    if not orchestrators:
        return None
    last = min((o.last_success_at for o in orchestrators if o.last_success_at), default=now - timedelta(seconds=30))
    interval = max((now - last).total_seconds(), 1.0)
    with transaction.atomic():
        state = load_state()
        arrivals = trace.arrivals(_epoch(last), _epoch(now), speedup())
        result = advance(state, arrivals, _epoch(now))
        _persist_round(state, result, arrivals, now)
        _record_samples([(now, interval, _snapshot_of(state))], orchestrators)
        _record_collector_runs(orchestrators, state, now)
        record_demo_views(orchestrators, now)
        record_demo_split(orchestrators, now)
    refresh_rollups(last, now)
    evaluate_quietly(now)
    return result


def record_demo_split(orchestrators, now: datetime) -> int:
    """The demo's governance round: every team's fleet guarantee and cap split over the demo's simulated
    orchestrators, one cell per GPU model of their nodes, from the round's running and pending work, and saved
    as the split they hold (``EntitlementShare``, moves audited like a real round's). The demo's clusters are
    the portal's own simulation, so what the split says is what they hold: nothing is written elsewhere, and
    real orchestrators' rounds (``enforcement.rounds.reconcile``) never see these rows. Returns the shares moved."""
    if not orchestrators:
        return 0
    split = entitlement_split.round_split(
        governance_input(now), orchestrators, now, record=False, by_node_model=True
    )
    return entitlement_split.record_split(split, orchestrators, now)


def _persist_round(state: FederationState, result: RoundResult, arrivals, now: datetime) -> None:
    orchestrators = {o.name: o for o in demo_orchestrators()}
    teams = {t.slug: t for t in Team.objects.all()}
    Workload.objects.bulk_create([_workload_row(job, orchestrators, teams) for job in arrivals], ignore_conflicts=True)
    by_id = {
        w.external_id: w
        for w in Workload.objects.filter(
            external_id__in=[r.job.external_id for r in (*result.started, *result.finished)]
            + [j.external_id for j in state.pending]
        )
    }
    changed: list[Workload] = []
    for run in result.finished:
        row = by_id[run.job.external_id]
        row.state, row.finished_at = Workload.State.COMPLETED, _aware(run.ends_at)
        changed.append(row)
    for run in result.started:
        row = by_id[run.job.external_id]
        row.state, row.started_at, row.pending_reason = Workload.State.RUNNING, now, ""
        row.nodes = [{"node": a.node, "gpus": list(a.gpu_indices)} for a in run.assignments]
        changed.append(row)
    for job in state.pending:
        row = by_id[job.external_id]
        reason = _pending_reason(state, job.external_id)
        if row.pending_reason != reason:
            row.pending_reason = reason
            changed.append(row)
    Workload.objects.bulk_update(
        changed, ["state", "started_at", "finished_at", "nodes", "pending_reason"], batch_size=500
    )
    _update_nodes(state, now)


def _workload_row(job: trace.DemoJob, orchestrators, teams, **extra) -> Workload:
    return Workload(
        orchestrator=orchestrators[job.orchestrator],
        external_id=job.external_id,
        team=teams.get(job.team),
        user=job.user,
        name=f"{job.kind}-{job.external_id}",
        kind=job.kind,
        gang_size=job.gang_size,
        gpus_per_member=job.gpus_per_member,
        submitted_at=_aware(job.submitted_at),
        duration_estimate_s=round(job.duration_s),
        **extra,
    )


def _update_nodes(state: FederationState, now: datetime) -> None:
    used: dict[str, int] = defaultdict(int)
    for run in state.running:
        for assignment in run.assignments:
            used[assignment.node] += len(assignment.gpu_indices)
    # The demo's machines are in the shared domain: another site's namesakes are not its nodes.
    rows = list(Node.objects.filter(domain="", name__in=[n.name for n in state.nodes]))
    for node in rows:
        node.gpu_allocated = used.get(node.name, 0)
        node.last_seen_at = now
        if node.state not in Node.UNSCHEDULABLE:
            node.state = (
                Node.State.IDLE
                if node.gpu_allocated == 0
                else Node.State.ALLOCATED
                if node.gpu_allocated == node.gpu_total
                else Node.State.MIXED
            )
    Node.objects.bulk_update(rows, ["gpu_allocated", "state", "last_seen_at"])


Snapshot = dict[tuple[str, str | None], tuple[float, float, float]]  # (orch, team) -> total, allocated, pending


def _snapshot_of(state: FederationState) -> Snapshot:
    totals: Snapshot = {}
    capacity: dict[str, float] = defaultdict(float)
    for node in state.nodes:
        capacity[node.orchestrator] += node.gpu_total
    allocated: dict[tuple[str, str | None], float] = defaultdict(float)
    pending: dict[tuple[str, str | None], float] = defaultdict(float)
    for run in state.running:
        for key in ((run.job.orchestrator, run.job.team), (run.job.orchestrator, None)):
            allocated[key] += run.job.gpus
    for job in state.pending:
        for key in ((job.orchestrator, job.team), (job.orchestrator, None)):
            pending[key] += job.gpus
    for key in set(allocated) | set(pending) | {(o, None) for o in capacity}:
        totals[key] = (capacity[key[0]] if key[1] is None else 0.0, allocated[key], pending[key])
    return totals


def _record_samples(snapshots: list[tuple[datetime, float, Snapshot]], orchestrators) -> None:
    by_name = {o.name: o for o in orchestrators}
    teams = {t.slug: t for t in Team.objects.all()}
    rows = [
        UsageSample(
            taken_at=taken_at,
            interval_s=interval,
            orchestrator=by_name[orch],
            team=teams.get(team) if team else None,
            gpus_total=total,
            gpus_allocated=allocated,
            gpus_pending=pending,
        )
        for taken_at, interval, snapshot in snapshots
        for (orch, team), (total, allocated, pending) in snapshot.items()
        if orch in by_name
    ]
    UsageSample.objects.bulk_create(rows, batch_size=2000)


def _record_history_runs(snapshots: list[tuple[datetime, float, Snapshot]], orchestrators, state) -> None:
    """One successful scrape per replayed step and source, as the rounds would have left them: a week's
    report judges each source's staleness from that week's scrapes, so a history without them read as
    "stale 167 h" beside thousands of allocated GPU-hours."""
    nodes: dict[str, int] = defaultdict(int)
    for node in state.nodes:
        nodes[node.orchestrator] += 1
    rows = [
        CollectorRun(
            orchestrator=orch,
            started_at=taken_at,
            ok=True,
            nodes=nodes[orch.name],
            gpus_total=round(snapshot[(orch.name, None)][0]),
            gpus_allocated=round(snapshot[(orch.name, None)][1]),
            pending_gpus=round(snapshot[(orch.name, None)][2]),
        )
        for taken_at, _interval, snapshot in snapshots[:-1]  # the last step is the run of _record_collector_runs
        for orch in orchestrators
        if (orch.name, None) in snapshot
    ]
    CollectorRun.objects.bulk_create(rows, batch_size=2000)


def _record_collector_runs(orchestrators, state: FederationState, now: datetime) -> None:
    for orch in orchestrators:
        nodes = [n for n in state.nodes if n.orchestrator == orch.name]
        running = [r for r in state.running if r.job.orchestrator == orch.name]
        pending = [j for j in state.pending if j.orchestrator == orch.name]
        CollectorRun.objects.create(
            orchestrator=orch,
            started_at=now,
            ok=True,
            nodes=len(nodes),
            gpus_total=sum(n.gpu_total for n in nodes),
            gpus_allocated=sum(r.job.gpus for r in running),
            workloads_running=len(running),
            workloads_pending=len(pending),
            pending_gpus=sum(j.gpus for j in pending),
        )
        orch.last_success_at = now
        orch.save(update_fields=["last_success_at"])


def fill_history(days: float, step_s: float = 300, now: datetime | None = None) -> int:
    """Replay the past ``days`` in memory, then store the samples, workloads and final state at once."""
    now = now or timezone.now()
    orchestrators = list(demo_orchestrators())
    state = load_state()
    start = now - timedelta(days=days)
    snapshots, jobs, starts, ends = [], {}, {}, {}
    moment = start
    while moment < now:
        following = min(moment + timedelta(seconds=step_s), now)
        arrivals = trace.arrivals(_epoch(moment), _epoch(following), speedup())
        jobs.update((job.external_id, job) for job in arrivals)
        result = advance(state, arrivals, _epoch(following))
        starts.update((r.job.external_id, r) for r in result.started)
        ends.update((r.job.external_id, r) for r in result.finished)
        snapshots.append((following, (following - moment).total_seconds(), _snapshot_of(state)))
        moment = following
    with transaction.atomic():
        _store_history_workloads(jobs, starts, ends, state)
        _update_nodes(state, now)
        _record_samples(snapshots, orchestrators)
        _record_history_runs(snapshots, orchestrators, state)
        _record_collector_runs(orchestrators, state, now)
        record_demo_views(orchestrators, now)
        record_demo_split(orchestrators, now)
    refresh_rollups(start, now)
    evaluate_quietly(now)  # the ledger starts with the replayed fleet
    return len(jobs)


def _pending_reason(state: FederationState, job_id: str) -> str:
    """The engine's reason, or why there is none: it tries only the head of each queue per round, so a job
    further back (or one stored before with no reason) has not been looked at yet."""
    return state.pending_reasons.get(job_id) or "waiting for its turn in the queue"


def _store_history_workloads(jobs, starts, ends, state: FederationState) -> None:
    orchestrators = {o.name: o for o in demo_orchestrators()}
    teams = {t.slug: t for t in Team.objects.all()}
    rows = []
    for job_id, job in jobs.items():
        run = starts.get(job_id)
        extra: dict[str, object] = {
            "state": Workload.State.PENDING,
            "pending_reason": _pending_reason(state, job_id),
        }
        if run is not None:
            extra = {
                "state": Workload.State.COMPLETED if job_id in ends else Workload.State.RUNNING,
                "started_at": _aware(run.started_at),
                "finished_at": _aware(run.ends_at) if job_id in ends else None,
                "nodes": [{"node": a.node, "gpus": list(a.gpu_indices)} for a in run.assignments],
            }
        rows.append(_workload_row(job, orchestrators, teams, **extra))
    Workload.objects.bulk_create(rows, batch_size=1000, ignore_conflicts=True)
