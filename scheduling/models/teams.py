"""Teams, their members, and their entitlements (queues)."""

from django.conf import settings
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from simple_history.models import HistoricalRecords


class Team(models.Model):
    """A node of the team tree; entitlements hang off teams through Queue rows."""

    slug = models.SlugField(unique=True)
    name = models.CharField(max_length=120)
    parent = models.ForeignKey("self", null=True, blank=True, on_delete=models.PROTECT, related_name="children")
    description = models.TextField(blank=True)
    history = HistoricalRecords()

    class Meta:
        ordering = ["slug"]

    def __str__(self) -> str:
        return self.name

    def ancestors(self) -> list["Team"]:
        chain, team = [], self.parent
        while team is not None:
            chain.append(team)
            team = team.parent
        return chain


class Membership(models.Model):
    class Role(models.TextChoices):
        RESEARCHER = "researcher", "Researcher"
        LEAD = "lead", "Team lead"

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships")
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=16, choices=Role.choices, default=Role.RESEARCHER)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["user", "team"], name="one_membership_per_team")]

    def __str__(self) -> str:
        return f"{self.user} in {self.team} ({self.role})"


class Queue(models.Model):
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
