"""Fill the database with a synthetic fleet and a long usage history, for benchmarks and load tests.

Default: 1,000 nodes / 8,000 GPUs under three orchestrators, 50 teams, a year of hourly and daily
rollups, two days of raw samples, and a year of workloads (placements kept for the last week). All
rows go in with bulk inserts; ``--seed`` makes it reproducible. Names start with ``gen-`` so the data
never collides with the demo federation.
"""

import math
import random
from datetime import timedelta
from decimal import Decimal

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from django.db import connection, transaction
from django.utils import timezone

from scheduling.models import (
    CollectorRun,
    Membership,
    Node,
    NodeMove,
    Orchestrator,
    Queue,
    QuotaGrant,
    QuotaRequest,
    RebalancePlan,
    Team,
    UsageRollup,
    UsageSample,
    Workload,
)
from scheduling.services.fragmentation import backfill_fragmentation

PREFIX = "gen-"
ORCHESTRATORS = (("slurm", "slurm", 0.6), ("k8s", "kubernetes", 0.25), ("ray", "ray", 0.15))
SIZES = ((1, 1, 50), (1, 2, 10), (1, 4, 10), (1, 8, 18), (2, 8, 6), (4, 8, 4), (8, 8, 2))  # members, per member, weight
REASONS = (
    "no {gpus} free GPUs inside one leaf switch (largest free block {free})",
    "team over its burst limit: {gpus} GPUs would exceed it",
    "waiting behind the reservation for a larger gang",
    "no {gpus} free GPUs of the requested model",
)
BATCH = 5000


def fast_insert(objects: list) -> None:
    """Rows for model instances with no per-value field preparation and no returned ids: COPY on PostgreSQL,
    plain multi-row INSERTs elsewhere. ``bulk_create`` spends most of its time preparing values, which matters
    at a million rows; COPY writes a year for 10,000 GPUs several times faster than INSERTs."""
    if not objects:
        return
    model, ops = type(objects[0]), connection.ops
    fields = [f for f in model._meta.concrete_fields if not f.primary_key]

    def adapter(field):
        kind = field.get_internal_type()
        if kind == "DateTimeField":
            return ops.adapt_datetimefield_value
        if kind == "JSONField":
            return lambda value: ops.adapt_json_value(value, field.encoder)
        return None

    adapters = [(field.attname, adapter(field)) for field in fields]
    columns = ", ".join(ops.quote_name(field.column) for field in fields)
    marks = ", ".join(["%s"] * len(fields))
    sql = f"INSERT INTO {ops.quote_name(model._meta.db_table)} ({columns}) VALUES ({marks})"  # nosec B608 - table and column names come from model metadata, values are parameters
    rows = []
    for obj in objects:
        row = []
        for name, adapt in adapters:
            value = getattr(obj, name)
            row.append(adapt(value) if adapt is not None and value is not None else value)
        rows.append(row)
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            copy_sql = f"COPY {ops.quote_name(model._meta.db_table)} ({columns}) FROM STDIN"
            with cursor.cursor.copy(copy_sql) as copy:
                for row in rows:
                    copy.write_row(row)
            return
        for start in range(0, len(rows), BATCH):
            cursor.executemany(sql, rows[start : start + BATCH])


class Command(BaseCommand):
    help = "Generate a synthetic fleet with a long usage history (benchmarks); refuses to run twice."

    def add_arguments(self, parser):
        parser.add_argument("--nodes", type=int, default=1000)
        parser.add_argument("--gpus-per-node", type=int, default=8)
        parser.add_argument("--teams", type=int, default=50)
        parser.add_argument("--days", type=float, default=365)
        parser.add_argument("--sample-hours", type=float, default=48, help="hours of raw samples (default 48)")
        parser.add_argument("--sample-step", type=int, default=60, help="seconds between raw samples")
        parser.add_argument("--jobs-per-day", type=int, default=600)
        parser.add_argument("--placements-days", type=float, default=7, help="days of jobs that keep their nodes")
        parser.add_argument("--seed", type=int, default=1)
        parser.add_argument("--prefix", default=PREFIX, help="name prefix of every generated row (default gen-)")

    def handle(self, *args, **opts):
        self.prefix = opts["prefix"]
        self.label = "" if self.prefix == PREFIX else self.prefix
        if Orchestrator.objects.filter(name__startswith=self.prefix).exists():
            raise CommandError(f"generated data already present ({self.prefix}*); use a fresh database or --prefix.")
        self.rng = random.Random(opts["seed"])
        self.now = timezone.now().replace(second=0, microsecond=0)
        with transaction.atomic():
            orchestrators = self._orchestrators()
            nodes = self._nodes(orchestrators, opts["nodes"], opts["gpus_per_node"])
            teams, leaves = self._teams(opts["teams"], sum(n.gpu_total for n in nodes))
            placement = self._leaf_orchestrators(leaves, orchestrators)
            self._series(orchestrators, nodes, placement, opts)
            self._workloads(orchestrators, nodes, placement, opts)
            self._fragmentation(opts)
            self._runs_and_plans(orchestrators, nodes)
            self._quota(teams, leaves)
        self.stdout.write(
            f"Generated {len(nodes)} nodes / {sum(n.gpu_total for n in nodes)} GPUs, {len(teams)} teams, "
            f"{opts['days']:g} days of history."
        )

    # --- fleet and teams ---------------------------------------------------------------------------

    def _orchestrators(self) -> list[Orchestrator]:
        return [
            Orchestrator.objects.create(
                name=f"{self.prefix}{name}",
                kind=kind,
                endpoint=f"https://{self.prefix}{name}.example:443",
                last_success_at=self.now,
            )
            for name, kind, _share in ORCHESTRATORS
        ]

    def _nodes(self, orchestrators, count: int, per_node: int) -> list[Node]:
        rows, index = [], 0
        for orch, (_name, _kind, share) in zip(orchestrators, ORCHESTRATORS, strict=True):
            owned = round(count * share) if orch.kind != "ray" else count - index
            for _ in range(owned):
                h100 = index < count * 0.6
                rows.append(
                    Node(
                        orchestrator=orch,
                        name=f"{self.prefix}node{index + 1:05d}",
                        gpu_model="H100" if h100 else "A100",
                        gpu_total=per_node,
                        cpu_total=128,
                        memory_mib=2_000_000,
                        nvlink_domain=f"nvl72-{index // 9 + 1:04d}" if h100 else f"nvl-node{index + 1:05d}",
                        leaf_switch=f"leaf-{index // 32 + 1:03d}",
                        spine=f"spine-{index // 256 + 1}",
                        state=Node.State.IDLE,
                        last_seen_at=self.now,
                    )
                )
                index += 1
        return Node.objects.bulk_create(rows, batch_size=BATCH)

    def _teams(self, count: int, capacity: int) -> tuple[list[Team], list[Team]]:
        tops = max(1, min(count, max(2, count // 10)))
        teams: list[Team] = []
        roots = [
            Team.objects.create(slug=f"{self.prefix}org{i + 1:02d}", name=f"{self.label}Org {i + 1}")
            for i in range(tops)
        ]
        teams += roots
        leaves: list[Team] = []
        for i in range(count - tops):
            parent = roots[i % tops]
            leaves.append(
                Team.objects.create(
                    slug=f"{self.prefix}team{i + 1:03d}", name=f"{self.label}Team {i + 1}", parent=parent
                )
            )
        teams += leaves
        children: dict[int, list[Team]] = {}
        for leaf in leaves:
            children.setdefault(leaf.parent_id, []).append(leaf)
        root_guarantee = int(capacity * 0.5 / tops)
        for root in roots:
            self._queue(root, Decimal(100) / tops, root_guarantee, min(capacity, root_guarantee * 3))
            kids = children.get(root.pk, [])
            for kid in kids:
                share = int(root_guarantee * 0.9 / len(kids))
                self._queue(kid, Decimal(100) / len(kids), share, min(capacity, max(share * 3, 8)))
        if not leaves:
            leaves = roots
        self._users(roots[0], leaves[0])
        return teams, leaves

    def _queue(self, team: Team, weight: Decimal, guaranteed: int, burst: int) -> None:
        queue = Queue(team=team, weight=weight.quantize(Decimal("0.01"), rounding="ROUND_DOWN"))
        queue.guaranteed, queue.burst_limit = guaranteed, burst
        queue._change_reason = "generated"  # type: ignore[attr-defined]
        queue.save()

    def _users(self, root: Team, leaf: Team) -> None:
        users = get_user_model().objects
        admin = users.create_user(f"{self.prefix}admin", is_staff=True, is_superuser=True)
        lead = users.create_user(f"{self.prefix}lead")
        researcher = users.create_user(f"{self.prefix}researcher")
        for user in (admin, lead, researcher):
            user.set_unusable_password()
            user.save()
        Membership.objects.create(user=lead, team=root, role=Membership.Role.LEAD)
        Membership.objects.create(user=researcher, team=leaf, role=Membership.Role.RESEARCHER)

    def _leaf_orchestrators(self, leaves, orchestrators) -> dict[int, list[Orchestrator]]:
        return {leaf.pk: self.rng.sample(orchestrators, k=1 + (self.rng.random() < 0.5)) for leaf in leaves}

    # --- usage series ------------------------------------------------------------------------------

    def _level(self, hours_ago: float, phase: float) -> float:
        """A plausible allocation fraction: diurnal and weekly swings plus noise."""
        daily = math.sin((hours_ago + phase) / 24 * 2 * math.pi)
        weekly = math.sin((hours_ago + phase * 7) / 168 * 2 * math.pi)
        return min(1.0, max(0.05, 0.68 + 0.15 * daily + 0.07 * weekly + self.rng.gauss(0, 0.04)))

    def _series(self, orchestrators, nodes, placement, opts) -> None:
        capacity = {o.pk: sum(n.gpu_total for n in nodes if n.orchestrator_id == o.pk) for o in orchestrators}
        tenants: dict[int, list[int]] = {o.pk: [] for o in orchestrators}
        for team_id, orchs in placement.items():
            for orch in orchs:
                tenants[orch.pk].append(team_id)
        phases = {key: self.rng.uniform(0, 24) for key in [(o, t) for o in tenants for t in tenants[o]]}
        busy_measured = {o.pk: o.kind != "ray" for o in orchestrators}  # Ray reports no DCGM utilisation here

        def snapshot(hours_ago: float):
            for orch_id, teams in tenants.items():
                total = capacity[orch_id]
                level = self._level(hours_ago, 0)
                allocated_total = total * level
                weights = [self._level(hours_ago, phases[(orch_id, t)]) for t in teams]
                scale = allocated_total / sum(weights) if weights else 0
                pending_total = total * max(0.0, level - 0.6) * 0.5
                busy = busy_measured[orch_id]
                for team_id, weight in zip(teams, weights, strict=True):
                    allocated = weight * scale
                    yield (
                        orch_id,
                        team_id,
                        0.0,
                        allocated,
                        allocated * 0.8 if busy else None,
                        pending_total / len(teams),
                    )
                yield (
                    orch_id,
                    None,
                    float(total),
                    allocated_total,
                    allocated_total * 0.8 if busy else None,
                    pending_total,
                )

        hours = int(opts["days"] * 24)
        start_hour = self.now.replace(minute=0) - timedelta(hours=hours)
        hourly, daily = [], {}
        for h in range(hours + 1):
            period = start_hour + timedelta(hours=h)
            covered = 3600.0 if h < hours else float((self.now - period).total_seconds()) or 60.0
            for orch_id, team_id, total, allocated, busy, pending in snapshot(hours - h):
                hourly.append(
                    UsageRollup(
                        resolution=UsageRollup.Resolution.HOUR,
                        period_start=period,
                        orchestrator_id=orch_id,
                        team_id=team_id,
                        gpu_s_total=total * covered,
                        gpu_s_allocated=allocated * covered,
                        gpu_s_busy=None if busy is None else busy * covered,
                        gpu_s_pending=pending * covered,
                        covered_s=covered,
                    )
                )
                day = period.replace(hour=0)
                row = daily.setdefault((day, orch_id, team_id), [0.0, 0.0, None, 0.0, 0.0])
                row[0] += total * covered
                row[1] += allocated * covered
                row[2] = None if busy is None else (row[2] or 0.0) + busy * covered
                row[3] += pending * covered
                row[4] += covered
            if len(hourly) >= BATCH:
                fast_insert(hourly)
                hourly = []
        fast_insert(hourly)
        fast_insert(
            [
                UsageRollup(
                    resolution=UsageRollup.Resolution.DAY,
                    period_start=day,
                    orchestrator_id=orch_id,
                    team_id=team_id,
                    gpu_s_total=v[0],
                    gpu_s_allocated=v[1],
                    gpu_s_busy=v[2],
                    gpu_s_pending=v[3],
                    covered_s=v[4],
                )
                for (day, orch_id, team_id), v in daily.items()
            ]
        )
        step = opts["sample_step"]
        samples = []
        moments = int(opts["sample_hours"] * 3600 // step)
        for i in range(moments, 0, -1):
            taken = self.now - timedelta(seconds=i * step)
            for orch_id, team_id, total, allocated, busy, pending in snapshot(i * step / 3600):
                samples.append(
                    UsageSample(
                        taken_at=taken,
                        orchestrator_id=orch_id,
                        team_id=team_id,
                        gpus_total=total,
                        gpus_allocated=allocated,
                        gpus_busy=busy,
                        gpus_pending=pending,
                        interval_s=step,
                    )
                )
            if len(samples) >= BATCH:
                fast_insert(samples)
                samples = []
        UsageSample.objects.bulk_create(samples)

    # --- workloads ---------------------------------------------------------------------------------

    def _shape(self) -> tuple[int, int]:
        members, per_member, _ = self.rng.choices(SIZES, weights=[s[2] for s in SIZES])[0]
        return members, per_member

    def _workloads(self, orchestrators, nodes, placement, opts) -> None:
        by_orch: dict[int, list[Node]] = {}
        for node in nodes:
            by_orch.setdefault(node.orchestrator_id, []).append(node)
        leaves = list(placement)
        rows: list[Workload] = []
        total_jobs = int(opts["jobs_per_day"] * opts["days"])
        keep_nodes = self.now - timedelta(days=opts["placements_days"])
        for i in range(total_jobs):
            team_id = self.rng.choice(leaves)
            orch = self.rng.choice(placement[team_id])
            members, per_member = self._shape()
            submitted = self.now - timedelta(seconds=self.rng.uniform(0, opts["days"] * 86400))
            wait = self.rng.lognormvariate(math.log(120 * members * per_member**0.5), 1.2)
            duration = self.rng.lognormvariate(math.log(3600), 1.3)
            started = submitted + timedelta(seconds=wait)
            finished = started + timedelta(seconds=duration)
            if started >= self.now:
                continue  # pending work is generated separately, against real free capacity
            where = []
            if finished > keep_nodes:
                for host in self.rng.sample(by_orch[orch.pk], k=min(members, len(by_orch[orch.pk]))):
                    where.append({"node": host.name, "gpus": list(range(per_member))})
            rows.append(
                Workload(
                    orchestrator=orch,
                    external_id=f"{self.prefix}{i}",
                    team_id=team_id,
                    user=f"user{team_id % 97}",
                    name=f"job-{i}",
                    kind=self.rng.choice(Workload.Kind.values),
                    gang_size=members,
                    gpus_per_member=per_member,
                    submitted_at=submitted,
                    started_at=started,
                    # Work still running at generation time is the live fleet's (_running_now); history
                    # ends here, so replayed placements agree with the nodes' counters.
                    finished_at=min(finished, self.now),
                    duration_estimate_s=int(duration),
                    state=Workload.State.COMPLETED,
                    nodes=where,
                )
            )
            if len(rows) >= BATCH:
                fast_insert(rows)
                rows = []
        fast_insert(rows)
        self._running_now(by_orch, placement)

    def _running_now(self, by_orch, placement) -> None:
        """Fill ~75 % of every pool with running gangs (node counters agree with them), then queue work."""
        rows, serial = [], 0
        leaves_of: dict[int, list[int]] = {}
        for team_id, orchs in placement.items():
            for orch in orchs:
                leaves_of.setdefault(orch.pk, []).append(team_id)
        for orch_id, pool in by_orch.items():
            free = {n.name: n.gpu_total for n in pool}
            target = sum(free.values()) * 0.75
            used = misses = 0
            while used < target and leaves_of.get(orch_id):
                members, per_member = self._shape()
                hosts = [n for n in self.rng.sample(pool, k=min(len(pool), members * 3)) if free[n.name] >= per_member]
                if len(hosts) < members:
                    misses += 1
                    if misses > 500:
                        break
                    continue
                where = []
                for host in hosts[:members]:
                    first = host.gpu_total - free[host.name]
                    where.append({"node": host.name, "gpus": list(range(first, first + per_member))})
                    free[host.name] -= per_member
                used += members * per_member
                serial += 1
                rows.append(self._live(orch_id, leaves_of[orch_id], members, per_member, serial, where))
            for _ in range(max(3, len(pool) // 20)):
                members, per_member = self._shape()
                serial += 1
                reason = self.rng.choice(REASONS).format(gpus=members * per_member, free=self.rng.randint(0, 7))
                rows.append(
                    self._live(orch_id, leaves_of.get(orch_id, [None]), members, per_member, serial, [], reason)
                )
            for node in pool:
                node.gpu_allocated = node.gpu_total - free[node.name]
                node.state = (
                    Node.State.IDLE
                    if node.gpu_allocated == 0
                    else Node.State.ALLOCATED
                    if free[node.name] == 0
                    else Node.State.MIXED
                )
        fast_insert(rows)
        Node.objects.bulk_update(
            [n for pool in by_orch.values() for n in pool], ["gpu_allocated", "state"], batch_size=BATCH
        )

    def _live(self, orch_id, teams, members, per_member, serial, where, reason: str = "") -> Workload:
        submitted = self.now - timedelta(seconds=self.rng.uniform(60, 6 * 3600))
        running = bool(where)
        return Workload(
            orchestrator_id=orch_id,
            external_id=f"{self.prefix}live-{serial}",
            team_id=self.rng.choice(teams),
            user=f"user{serial % 97}",
            name=f"live-{serial}",
            kind=Workload.Kind.TRAINING,
            gang_size=members,
            gpus_per_member=per_member,
            submitted_at=submitted,
            started_at=submitted + timedelta(seconds=30) if running else None,
            state=Workload.State.RUNNING if running else Workload.State.PENDING,
            nodes=where,
            pending_reason=reason,
            duration_estimate_s=4 * 3600,
        )

    def _fragmentation(self, opts) -> None:
        """Fragmentation samples (what each round would have stored) for the span where jobs kept their
        nodes, replayed from those placements; older history has no placements to replay."""
        span = timedelta(days=min(opts["placements_days"], opts["days"]))
        backfill_fragmentation(self.now - span, self.now, timedelta(seconds=max(opts["sample_step"], 300)))

    # --- scrapes, plans, quota ---------------------------------------------------------------------

    def _runs_and_plans(self, orchestrators, nodes) -> None:
        runs = []
        for orch in orchestrators:
            for i in range(0, 7 * 24 * 12):
                ok = self.rng.random() > 0.01
                runs.append(
                    CollectorRun(
                        orchestrator=orch,
                        started_at=self.now - timedelta(minutes=5 * i),
                        duration_ms=int(self.rng.lognormvariate(math.log(400), 0.4)),
                        ok=ok,
                        error="" if ok else "timeout after 10s",
                        nodes=len(nodes),
                    )
                )
        fast_insert(runs)
        plan = RebalancePlan.objects.create(
            reason="Ray queue deeper than its share overnight; moving idle Slurm nodes", expected_effect={"ray": 16}
        )
        donors = [n for n in nodes if n.orchestrator_id == orchestrators[0].pk][:2]
        NodeMove.objects.bulk_create(
            [
                NodeMove(plan=plan, node=n, source=orchestrators[0], target=orchestrators[2], reason="empty node")
                for n in donors
            ]
        )

    def _quota(self, teams, leaves) -> None:
        user = get_user_model().objects.get(username=f"{self.prefix}researcher")
        start = self.now + timedelta(days=1)
        for i, team in enumerate(leaves[:10]):
            request = QuotaRequest.objects.create(
                requester=user,
                team=team,
                gpus=8 * (i % 3 + 1),
                starts_at=start,
                ends_at=start + timedelta(days=7),
                justification="conference deadline",
                state=QuotaRequest.State.SUBMITTED if i % 2 else "approved",
            )
            if request.state == QuotaRequest.State.APPROVED:
                QuotaGrant.objects.create(
                    request=request, team=team, gpus=request.gpus, starts_at=request.starts_at, ends_at=request.ends_at
                )
