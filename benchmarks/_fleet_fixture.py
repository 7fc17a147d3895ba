"""A large synthetic federation for the API benchmark (idempotent: rebuilt only when absent)."""

from datetime import UTC, datetime, timedelta
from decimal import Decimal

NODES, TEAMS_TOP, TEAMS_PER_TOP, WORKLOADS = 1000, 10, 4, 5000


def build_fleet(clients: int) -> list[str]:
    """Return one API token per client user; build the fleet the first time."""
    from knox.models import AuthToken

    return [AuthToken.objects.create(user)[1] for user, _team in client_users(clients)]


def build_sessions(clients: int) -> list[tuple[str, str]]:
    """One signed-in browser session per client user (as ``django.contrib.auth.login`` stores it) and the slug
    of the team the user leads; build the fleet the first time."""
    from django.contrib.sessions.backends.db import SessionStore

    sessions = []
    for user, team in client_users(clients):
        store = SessionStore()
        store.update({
            "_auth_user_id": str(user.pk),
            "_auth_user_backend": "django.contrib.auth.backends.ModelBackend",
            "_auth_user_hash": user.get_session_auth_hash(),
        })  # fmt: skip
        store.create()
        sessions.append((store.session_key, team))
    return sessions


def client_users(clients: int):
    """(user, the slug of the team they lead): bench0 is a portal admin, the others lead a leaf team each."""
    from django.contrib.auth import get_user_model

    from scheduling.models import Membership, Team

    if not Team.objects.filter(slug="bench-0").exists():
        _build()
    users = get_user_model().objects
    leaf = list(Team.objects.filter(parent__isnull=False).order_by("pk"))
    result = []
    for index in range(clients):
        team = leaf[index % len(leaf)]
        user, created = users.get_or_create(username=f"bench{index}", defaults={"is_staff": index == 0})
        if created:
            Membership.objects.create(user=user, team=team, role=Membership.Role.LEAD)
        result.append((user, team.slug))
    return result


def _build() -> None:
    from scheduling.models import CollectorRun, Node, Orchestrator, Queue, QuotaRequest, Team, UsageRollup, Workload

    kinds = (("bench-slurm", "slurm"), ("bench-k8s", "kubernetes"), ("bench-ray", "ray"))
    orchestrators = [Orchestrator.objects.create(name=n, kind=k, endpoint=f"http://127.0.0.1:1/{n}") for n, k in kinds]
    Node.objects.bulk_create(
        Node(
            orchestrator=orchestrators[i % 3],
            name=f"bench-node{i:04d}",
            gpu_model="H100" if i % 2 else "A100",
            gpu_total=8,
            gpu_allocated=i % 9,
            nvlink_domain=f"nvl{i}",
            leaf_switch=f"leaf{i // 32}",
            spine="s0",
            state="mixed" if 0 < i % 9 < 8 else ("allocated" if i % 9 == 8 else "idle"),
        )
        for i in range(NODES)
    )
    teams = []
    for top in range(TEAMS_TOP):
        parent = Team.objects.create(slug=f"bench-{top}", name=f"Bench {top}")
        Queue.objects.create(team=parent, weight=Decimal(10), guaranteed=80, burst_limit=800)
        teams.append(parent)
        for child in range(TEAMS_PER_TOP):
            team = Team.objects.create(slug=f"bench-{top}-{child}", name=f"Bench {top}.{child}", parent=parent)
            Queue.objects.create(team=team, weight=Decimal(25), guaranteed=20, burst_limit=200)
            teams.append(team)
    now = datetime.now(UTC)
    Workload.objects.bulk_create(
        Workload(
            orchestrator=orchestrators[i % 3],
            external_id=str(i),
            team=teams[i % len(teams)],
            user=f"u{i % 97}",
            kind="training",
            gang_size=1 + i % 4,
            gpus_per_member=8 if i % 3 == 0 else 1,
            state="pending" if i % 5 == 0 else "running",
            submitted_at=now - timedelta(minutes=i),
            pending_reason="Resources" if i % 5 == 0 else "",
        )
        for i in range(WORKLOADS)
    )
    hours = [now.replace(minute=0, second=0, microsecond=0) - timedelta(hours=h) for h in range(24 * 7)]
    UsageRollup.objects.bulk_create(
        UsageRollup(
            resolution="hour",
            period_start=hour,
            orchestrator=o,
            team=None,
            gpu_s_total=3600 * 2666,
            gpu_s_allocated=3600 * 2000,
            covered_s=3600,
        )
        for hour in hours
        for o in orchestrators
    )
    CollectorRun.objects.bulk_create(
        CollectorRun(orchestrator=o, started_at=now - timedelta(seconds=30 * i), ok=True, nodes=333, gpus_total=2666)
        for i in range(200)
        for o in orchestrators
    )
    requester = None
    from django.contrib.auth import get_user_model

    requester = get_user_model().objects.create_user("bench-requester")
    QuotaRequest.objects.bulk_create(
        QuotaRequest(
            requester=requester,
            team=teams[i % len(teams)],
            gpus=8,
            starts_at=now,
            ends_at=now + timedelta(days=7),
            justification="bench",
            state="submitted",
        )
        for i in range(300)
    )
