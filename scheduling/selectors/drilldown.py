"""The utilisation drill-down, as Open XDMoD users expect it: a team's GPU-hours per user in a window, then a
user's jobs in that window.

GPU-hours here are job accounting (as Slurm's ``sreport``): each job's GPUs times the part of its run inside
the window, so a team's users add up to the team exactly. The utilisation page's per-team figure comes from
the sampled rounds instead (``usage.gpu_hours_by_team``); ``TeamUsers.sampled_h`` carries it so a page can
say how far the two differ. Waits are start minus submit of the jobs that started in the window. One query
per call, whatever the number of users or jobs.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime

from django.db.models import Q

from scheduling.models import Team, Workload
from scheduling.selectors.usage import gpu_hours_by_team, percentile

OTHER_USERS = "other users"
UNKNOWN_USER = "(unknown)"  # a job whose orchestrator named no submitter


@dataclass(frozen=True)
class JobInWindow:
    """One job as the drill-down lists it: its GPU-hours inside the window and its wait (None: not started)."""

    pk: int
    orchestrator: str
    external_id: str
    name: str
    user: str
    team: str
    state: str
    gpus: int
    submitted_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    gpu_hours: float
    wait_s: float | None
    started_in_window: bool

    @property
    def ran_in_window(self) -> bool:
        return self.gpu_hours > 0


@dataclass(frozen=True)
class UserUsage:
    """One user's row (or the unnamed row of the users the reader may not see by name)."""

    user: str
    gpu_hours: float
    jobs: int
    mean_wait_s: float | None
    p95_wait_s: float | None
    share_pct: float
    named: bool = True


@dataclass(frozen=True)
class TeamUsers:
    team: Team
    rows: list[UserUsage]
    gpu_hours: float
    sampled_h: float | None


def jobs_in_window(team_ids: list[int], since: datetime, until: datetime, user: str | None = None) -> list[JobInWindow]:
    """The jobs of these teams that held GPUs in ``[since, until)``, were submitted in it, or were still
    waiting through it; ``user`` narrows to one submitter. Newest submission first."""
    held = Q(started_at__lt=until) & (Q(finished_at__isnull=True) | Q(finished_at__gt=since))
    submitted = Q(submitted_at__gte=since, submitted_at__lt=until)
    still_waiting = Q(started_at__isnull=True, finished_at__isnull=True, submitted_at__lt=until)
    rows = Workload.objects.filter(team_id__in=team_ids).filter(held | submitted | still_waiting)
    if user is not None:
        rows = rows.filter(user="" if user == UNKNOWN_USER else user)
    fields = ("pk", "orchestrator__name", "external_id", "name", "user", "team__slug", "state", "gang_size",
              "gpus_per_member", "submitted_at", "started_at", "finished_at")  # fmt: skip
    return [_job(since, until, *row) for row in rows.order_by("-submitted_at", "-pk").values_list(*fields)]


def _job(since, until, pk, orch, external_id, name, user, team, state, gang, per_member, submitted, started, finished):
    gpus = gang * per_member
    hours = 0.0
    if started is not None:
        inside = (min(finished or until, until) - max(started, since)).total_seconds()
        hours = gpus * max(inside, 0.0) / 3600
    wait = None if started is None else max((started - submitted).total_seconds(), 0.0)
    started_in_window = started is not None and since <= started < until
    return JobInWindow(pk, orch, external_id, name, user or UNKNOWN_USER, team or "", state, gpus, submitted,
                       started, finished, hours, wait, started_in_window)  # fmt: skip


def team_users(team: Team, since: datetime, until: datetime, readable: frozenset[str] | None) -> TeamUsers:
    """``team``'s GPU-hours (its whole subtree) per user in the window. ``readable``: the users whose rows may
    be named (``access.usage_users_readable_by``; None: all); the others are summed into one unnamed row."""
    subtree = Team.objects.tree().subtree(team.pk)
    by_user: dict[str, list[JobInWindow]] = defaultdict(list)
    for job in jobs_in_window(subtree, since, until):
        shown = job.user if readable is None or job.user in readable else OTHER_USERS
        by_user[shown].append(job)
    total = sum(job.gpu_hours for jobs in by_user.values() for job in jobs)
    rows = [
        _user_row(name, jobs, total, named=name != OTHER_USERS or readable is None) for name, jobs in by_user.items()
    ]
    rows.sort(key=lambda row: (not row.named, -row.gpu_hours, row.user))
    sampled = next((r.allocated_h for r in gpu_hours_by_team(since, until, {team.pk}) if r.key == team.slug), None)
    return TeamUsers(team, rows, total, sampled)


def _user_row(name: str, jobs: list[JobInWindow], team_total: float, *, named: bool) -> UserUsage:
    hours = sum(job.gpu_hours for job in jobs)
    waits = sorted(job.wait_s for job in jobs if job.started_in_window and job.wait_s is not None)
    return UserUsage(
        user=name,
        gpu_hours=hours,
        jobs=sum(1 for job in jobs if job.ran_in_window),
        mean_wait_s=sum(waits) / len(waits) if waits else None,
        p95_wait_s=percentile(waits, 0.95) if waits else None,
        share_pct=100 * hours / team_total if team_total else 0.0,
        named=named,
    )


@dataclass(frozen=True)
class Member:
    node: str
    gpus: tuple[int, ...]


def placement(workload: Workload) -> list[Member]:
    """Where a job's members ran: ``Workload.nodes`` holds ``{"node", "gpus"}`` per member where the
    orchestrator reported GPU indices (the demo, Slurm's gres_detail), else bare node names."""
    members = []
    for item in workload.nodes if isinstance(workload.nodes, list) else []:
        if isinstance(item, dict) and item.get("node"):
            members.append(Member(str(item["node"]), tuple(item.get("gpus") or ())))
        elif isinstance(item, str):
            members.append(Member(item, ()))
    return members
