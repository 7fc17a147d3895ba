"""What the admission webhook reads for every pod: the teams by slug, which of them hold GPU quota, and the
enabled Kubernetes pools. Three ORM queries per admission were half of its CPU (docs/performance.md); the
answers change a few times a day, and the pods come hundreds a second.

So they are read once and reused while none of their tables has changed: each table's PostgreSQL generation
(``services/table_changes``, moved by a trigger on every committed write) is read in one small query, and a
different generation means read again. That query is made at most once per ``GPUPORTAL_ADMISSION_DIRECTORY_SECONDS``
(1 s) per process: a burst of admissions in between makes no query at all (the generations query was a quarter of
an admission's CPU). So a quota, grant, team, mapping or pool change takes effect within one lifetime; 0 checks
the generations on every admission (never stale). Where generations cannot be trusted (SQLite, a table without
its trigger) or inside a transaction (our own uncommitted writes, which pytest-django's tests are), the directory
is read for each admission. The generations are read before the tables, so a commit in between only makes the
directory newer than its stamp: the next check reads again.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from dataclasses import field as dataclass_field
from datetime import datetime

from django.conf import settings
from django.db import connection
from django.utils import timezone

from scheduling.collectors.verbs import POOL_LABEL
from scheduling.models import Node, Orchestrator, Queue, QuotaGrant, Team
from scheduling.selectors import entitlements

from . import table_changes
from .orchestrators import mapped_namespaces, runs_volcano

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
    without_volcano: frozenset[str] = frozenset()
    """Pools (by name) whose cluster runs no Volcano scheduler (option ``volcano`` false): a pod routed to
    ``volcano`` there would never be bound."""


@dataclass(frozen=True)
class _Held:
    stamp: dict[str, int]  # the tables' generations the directory was read at (or last found unchanged at)
    directory: Directory
    checked_until: float  # monotonic: reuse without asking the database until then


_cached: _Held | None = None


def directory() -> Directory:
    global _cached
    if connection.in_atomic_block or table_changes.readiness() != "ok":
        return read_directory()
    held = _cached
    now = time.monotonic()
    if held is not None and now < held.checked_until and _entitlements_hold(held.directory):
        return held.directory
    lifetime = now + settings.GPUPORTAL_ADMISSION_DIRECTORY_SECONDS
    stamp = table_changes.generations(TABLES)
    if held is not None and held.stamp == stamp and _entitlements_hold(held.directory):
        _cached = _Held(stamp, held.directory, lifetime)  # one assignment: threads see the old or the new
        return held.directory
    fresh = read_directory()
    _cached = _Held(stamp, fresh, lifetime)
    return fresh


def _entitlements_hold(known: Directory) -> bool:
    """No grant has started or ended since the directory was read (that changes entitlements, not tables)."""
    return known.until is None or timezone.now() < known.until


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
                     mapped_namespaces(), labelled_pools(pools), entitlements.next_change(now),
                     frozenset(pool.name for pool in pools if not runs_volcano(pool)))


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
