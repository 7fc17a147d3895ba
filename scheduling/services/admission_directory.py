"""What the admission webhook reads for every pod: the teams by slug, which of them hold GPU quota, and the
enabled Kubernetes pools. Three ORM queries per admission were half of its CPU (docs/performance.md); the
answers change a few times a day, and the pods come hundreds a second.

So they are read once and reused while none of their tables has changed: each table's PostgreSQL generation
(``services/table_changes``, moved by a trigger on every committed write) is read in one small query per
admission, and a different generation means read again. Never stale: a quota granted a second ago counts.
Where generations cannot be trusted (SQLite, a table without its trigger) or inside a transaction (our own
uncommitted writes, which pytest-django's tests are), the directory is read for each admission, as before.
The generations are read before the tables, so a commit in between only makes the directory newer than its
stamp: the next admission reads again.
"""

from __future__ import annotations

from dataclasses import dataclass
from dataclasses import field as dataclass_field
from datetime import datetime

from django.db import connection
from django.utils import timezone

from scheduling.collectors.verbs import POOL_LABEL
from scheduling.models import Node, Orchestrator, Queue, QuotaGrant, Team
from scheduling.selectors import entitlements

from . import table_changes
from .orchestrators import mapped_namespaces

TABLES = tuple(model._meta.db_table for model in (Team, Queue, QuotaGrant, Orchestrator, Node))


@dataclass(frozen=True)
class Directory:
    teams: dict[str, Team]
    with_quota: frozenset[int]
    """Teams that hold GPUs (``selectors/entitlements``: a queue of any model or a GPU model, an active grant, or
    a parent's): the ones that may run GPU work."""
    pools: dict[int, str]
    """Enabled Kubernetes pools (id -> name) by name: the first is the default."""
    serving: dict[int, frozenset[str]]
    """Per team id, the workload kinds it may run with the serving scheduler and priority (its own
    ``serving_kinds`` and its ancestors'): what an admin allowed, never what a pod's annotation asks."""
    namespaces: dict[str, str] = dataclass_field(default_factory=dict)
    """Namespace -> team slug of the Kubernetes orchestrators' governance mappings: those namespaces are the
    team's, whatever a pod's labels say."""
    labelled: frozenset[str] = frozenset()
    """Pools with a schedulable node labelled ``gpuportal.io/pool=<pool>``: the only pools the webhook may pin a
    pod to (on a fresh cluster no node carries it until a rebalance has labelled some)."""
    until: datetime | None = None
    """The next grant start or end: entitlements change then without any table changing."""


_cached: tuple[dict[str, int], Directory] | None = None


def directory() -> Directory:
    global _cached
    if connection.in_atomic_block or table_changes.readiness() != "ok":
        return read_directory()
    stamp = table_changes.generations(TABLES)
    cached = _cached
    if cached is not None and cached[0] == stamp and (cached[1].until is None or timezone.now() < cached[1].until):
        return cached[1]
    fresh = read_directory()
    _cached = (stamp, fresh)  # one assignment: threads see the old pair or the new one
    return fresh


def forget() -> None:
    """Drop the reused directory (tests; after ``manage.py flush``, which empties the table-change log, so new
    rows could sum to the generations the old directory was stamped with)."""
    global _cached
    _cached = None


def read_directory() -> Directory:
    now = timezone.now()
    teams = {team.slug: team for team in Team.objects.all()}
    holding = entitlements.team_entitlements(now, teams.values())
    quota = frozenset(team.pk for slug, team in teams.items() if slug in holding and holding[slug].holds_gpus)
    pools = Orchestrator.objects.filter(enabled=True, kind=Orchestrator.Kind.KUBERNETES).order_by("name")
    return Directory(teams, quota, dict(pools.values_list("pk", "name")), serving_kinds(teams.values()),
                     mapped_namespaces(), labelled_pools(pools), entitlements.next_change(now))


def labelled_pools(pools) -> frozenset[str]:
    """The pools (by name) whose schedulable nodes include one carrying their ``gpuportal.io/pool`` label, as
    the collector last saw it. In Python: SQLite has no JSON containment, and a key holds a dot and a slash."""
    names = dict(pools.values_list("pk", "name"))
    rows = Node.objects.schedulable().filter(orchestrator_id__in=names).values_list("orchestrator_id", "labels")
    return frozenset(
        names[pk] for pk, labels in rows if isinstance(labels, dict) and labels.get(POOL_LABEL) == names[pk]
    )


def serving_kinds(teams) -> dict[int, frozenset[str]]:
    """Each team's serving entitlement with what it inherits from its ancestors (a cycle ends the walk)."""
    by_id = {team.pk: team for team in teams}
    entitled: dict[int, frozenset[str]] = {}
    for team in by_id.values():
        kinds: set[str] = set()
        seen: set[int] = set()
        node = team
        while node is not None and node.pk not in seen:
            seen.add(node.pk)
            kinds.update(node.serving_kinds or ())
            node = by_id.get(node.parent_id)
        entitled[team.pk] = frozenset(kinds)
    return entitled
