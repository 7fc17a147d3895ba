"""Teams, their members, and their entitlements (queues)."""

from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, TypeVar

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models.signals import post_delete, post_save
from simple_history.models import HistoricalRecords

from scheduling.validators import validate_serving_kinds

from .versioned import Versioned

T = TypeVar("T")


@dataclass(frozen=True)
class TeamTree:
    """The whole team tree read once (one query of id, parent_id, …): every walk over teams starts here.

    ``children`` lists each parent's children ids ordered by slug (``None`` holds the top-level teams), so
    ``walk`` visits the tree in the order the pages show it.
    """

    teams: dict[int, "Team"]
    children: dict[int | None, list[int]]

    @classmethod
    def of(cls, teams: Iterable["Team"]) -> "TeamTree":
        by_id = {team.pk: team for team in teams}
        children: dict[int | None, list[int]] = defaultdict(list)
        for team in sorted(by_id.values(), key=lambda t: t.slug):
            children[team.parent_id].append(team.pk)
        return cls(by_id, dict(children))

    def subtree(self, team_id: int) -> list[int]:
        """The team and every team below it."""
        ids, stack = [], [team_id]
        while stack:
            current = stack.pop()
            ids.append(current)
            stack.extend(self.children.get(current, []))
        return ids

    def subtrees(self, roots: Iterable[int]) -> set[int]:
        """The given teams and every team below any of them."""
        return {tid for root in roots for tid in self.subtree(root)}

    def ancestors(self, team_id: int) -> list[int]:
        """The teams above, nearest first (the top-level team last)."""
        chain, parent = [], self.parent_id(team_id)
        while parent is not None and parent not in chain:
            chain.append(parent)
            parent = self.parent_id(parent)
        return chain

    def parent_id(self, team_id: int) -> int | None:
        team = self.teams.get(team_id)
        return team.parent_id if team is not None else None

    def parent_slug(self, team_id: int) -> str | None:
        parent_id = self.parent_id(team_id)
        parent = self.teams.get(parent_id) if parent_id is not None else None
        return parent.slug if parent is not None else None

    def walk(self, parent: int | None = None, depth: int = 0) -> Iterator[tuple["Team", int]]:
        """Every team below ``parent`` (all teams by default) with its depth, parents before children,
        siblings by slug."""
        for team_id in self.children.get(parent, []):
            yield self.teams[team_id], depth
            yield from self.walk(team_id, depth + 1)


# The tree read once per scope (a web request: views/request_scope.py), not once per reader: a page's rules,
# selectors and context processor each ask for it. No scope (Celery, shell, tests calling in): every call reads.
_scoped_tree: ContextVar[dict[object, Any] | None] = ContextVar("scoped_team_tree", default=None)


@contextmanager
def team_tree_scope() -> Iterator[None]:
    """Within it, ``Team.objects.tree()`` (of every team, by any plain queryset) reads the database once;
    a saved or deleted team forgets the read, so a writer re-reading sees its own write."""
    token = _scoped_tree.set({})
    try:
        yield
    finally:
        _scoped_tree.reset(token)


def forget_team_tree(**_kwargs) -> None:
    memo = _scoped_tree.get()
    if memo is not None:
        memo.clear()


def once_per_scope(key: object, read: Callable[[], T]) -> T:
    """``read()`` once per scope and ``key`` (each call outside a scope), forgotten with the tree on any write of
    a team or a membership: who sees which teams, asked by every filter, form and selector of a page."""
    memo = _scoped_tree.get()
    if memo is None:
        return read()
    if key not in memo:
        memo[key] = read()
    return memo[key]


class TeamQuerySet(models.QuerySet):
    def tree(self) -> TeamTree:
        memo = _scoped_tree.get()
        if memo is None or not self._is_every_team():
            return TeamTree.of(self)
        if self.db not in memo:  # every field, so it also serves the readers that asked for .only(...)
            memo[self.db] = TeamTree.of(self.model._base_manager.db_manager(self.db).all())
        return memo[self.db]

    def _is_every_team(self) -> bool:
        """No filter, annotation, extra or slice: the queryset reads every team, whatever columns it defers."""
        query = self.query
        return (
            not query.where
            and not query.annotations
            and not query.extra
            and query.low_mark == 0
            and query.high_mark is None
        )


class Team(models.Model):
    """A node of the team tree; entitlements hang off teams through Queue rows."""

    slug = models.SlugField(unique=True)
    name = models.CharField(max_length=120)
    parent = models.ForeignKey("self", null=True, blank=True, on_delete=models.PROTECT, related_name="children")
    description = models.TextField(blank=True)
    serving_kinds = models.JSONField(
        default=list, blank=True, validators=[validate_serving_kinds],
        help_text="workload kinds (inference, training, hpo, batch) whose GPU pods the admission webhook may send to "
        "the default scheduler with priority class gpuportal-serving; sub-teams inherit. A pod asking for more "
        "(scheduler.gpuportal.io/scheduler or /kind) is lowered to batch or denied (GPUPORTAL_ADMISSION_ESCALATION)",
    )
    history = HistoricalRecords()

    objects = TeamQuerySet.as_manager()

    class Meta:
        ordering = ["slug"]

    def __str__(self) -> str:
        return self.name

    def ancestors(self) -> list["Team"]:
        """The teams above this one, nearest first (no query for a top-level team)."""
        if self.parent_id is None:
            return []
        tree = Team.objects.tree()
        return [tree.teams[tid] for tid in tree.ancestors(self.pk)]


post_save.connect(forget_team_tree, sender=Team, dispatch_uid="forget-team-tree-on-save")
post_delete.connect(forget_team_tree, sender=Team, dispatch_uid="forget-team-tree-on-delete")


class Role(models.TextChoices):
    RESEARCHER = "researcher", "Researcher"
    LEAD = "lead", "Team lead"


class Membership(models.Model):
    """A user in a team. ``source`` says who owns the row: an admin's hand (``manual``), never touched by
    sign-in, or a group mapping (``mapping``), re-synced from the user's directory groups (docs/identity.md)."""

    Role = Role

    class Source(models.TextChoices):
        MANUAL = "manual", "Typed in by an admin"
        MAPPING = "mapping", "From a directory group mapping"

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships")
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=16, choices=Role.choices, default=Role.RESEARCHER)
    source = models.CharField(max_length=16, choices=Source.choices, default=Source.MANUAL)
    history = HistoricalRecords()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["user", "team"], name="one_membership_per_team")]

    def __str__(self) -> str:
        return f"{self.user} in {self.team} ({self.role})"


class GroupMapping(models.Model):
    """Members of a directory (LDAP) or OIDC group matching ``pattern`` belong to ``team`` as ``role``.

    ``pattern`` is shell-style (``gpu-vision-*``), matched case-insensitively (engine/identity.py). A
    governance rule: admins edit it in the admin and the API, each change audited with who and why.
    """

    pattern = models.CharField(max_length=200, help_text="Group name or shell pattern (* ? [seq]), any case.")
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="group_mappings")
    role = models.CharField(max_length=16, choices=Role.choices, default=Role.RESEARCHER)
    history = HistoricalRecords()

    class Meta:
        ordering = ["pattern", "team__slug"]
        constraints = [models.UniqueConstraint(fields=["pattern", "team"], name="one_mapping_per_pattern_and_team")]

    def __str__(self) -> str:
        return f"{self.pattern} -> {self.team.slug} ({self.role})"


class ExternalIdentity(models.Model):
    """Where a user signs in from (LDAP or an OIDC provider) and the groups it said last, for the periodic
    re-sync: LDAP is searched again, OIDC's last claims are mapped again (docs/identity.md)."""

    class Provider(models.TextChoices):
        LDAP = "ldap", "LDAP"
        OIDC = "oidc", "OpenID Connect"

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="external_identity")
    provider = models.CharField(max_length=8, choices=Provider.choices)
    subject = models.CharField(max_length=255, help_text="The LDAP username or the OIDC sub claim.")
    groups = models.JSONField(default=list, blank=True)
    synced_at = models.DateTimeField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["provider", "subject"], name="one_user_per_external_subject")]

    def __str__(self) -> str:
        return f"{self.provider}:{self.subject}"


class Queue(Versioned):
    """A team's entitlement, optionally per GPU model (blank = any model).

    ``weight`` is the team's fair-share percentage of its parent's share; ``guaranteed`` GPUs are never
    lent away while the team has demand; ``burst_limit`` caps what it may hold when borrowing idle
    capacity (Kueue nominal/borrowingLimit, YuniKorn guaranteed/max).
    """

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="queues")
    gpu_model = models.CharField(max_length=40, blank=True, default="")
    weight = models.DecimalField(
        max_digits=5, decimal_places=2, validators=[MinValueValidator(0), MaxValueValidator(100)]
    )
    guaranteed = models.PositiveIntegerField(default=0)
    burst_limit = models.PositiveIntegerField(default=0)
    history = HistoricalRecords()

    class Meta:
        ordering = ["team__slug", "gpu_model"]
        constraints = [
            models.UniqueConstraint(fields=["team", "gpu_model"], name="one_queue_per_team_and_model"),
            models.CheckConstraint(
                condition=models.Q(guaranteed__lte=models.F("burst_limit")), name="guaranteed_within_burst"
            ),
            models.CheckConstraint(condition=models.Q(weight__gte=0, weight__lte=100), name="weight_is_a_percentage"),
        ]

    def __str__(self) -> str:
        return f"{self.team.slug}/{self.gpu_model or 'any'}"


post_save.connect(forget_team_tree, sender=Membership, dispatch_uid="forget-team-tree-on-membership-save")
post_delete.connect(forget_team_tree, sender=Membership, dispatch_uid="forget-team-tree-on-membership-delete")
