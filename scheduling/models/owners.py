"""Admins' overrides of who a workload's submitter is (engine/owners.py holds the rules and the defaults)."""

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models
from django.db.models import Q
from simple_history.models import HistoricalRecords

from scheduling.engine.owners import NameKind, name_problem

from .fleet import Orchestrator

# The orchestrator kind each kind of name comes from: a Slurm user override on a Ray source could never match.
NAME_SOURCES = {
    NameKind.SLURM_USER: Orchestrator.Kind.SLURM,
    NameKind.KUBERNETES_LABEL: Orchestrator.Kind.KUBERNETES,
    NameKind.KUBERNETES_SERVICE_ACCOUNT: Orchestrator.Kind.KUBERNETES,
    NameKind.KUBERNETES_NAMESPACE: Orchestrator.Kind.KUBERNETES,
    NameKind.RAY_SUBMITTER: Orchestrator.Kind.RAY,
}


class IdentityOverride(models.Model):
    """On ``orchestrator`` (blank: on every one of the kind's orchestrators) the submitter name ``name`` of kind
    ``kind`` is portal user ``user``: their workloads become theirs, and for Slurm governance creates the
    user association under that name. Without an override, a Slurm user, a ``gpuportal.io/user`` label or a
    Ray submitter that equals a portal username is that user (docs/identity.md, "Whose workload is it").
    A governance rule: admins edit it in the admin and the API, each change audited with who and why."""

    class Kind(models.TextChoices):  # engine/owners.NameKind
        SLURM_USER = NameKind.SLURM_USER.value, "Slurm user"
        KUBERNETES_LABEL = NameKind.KUBERNETES_LABEL.value, "Kubernetes gpuportal.io/user label"
        KUBERNETES_SERVICE_ACCOUNT = NameKind.KUBERNETES_SERVICE_ACCOUNT.value, "Kubernetes service account"
        KUBERNETES_NAMESPACE = NameKind.KUBERNETES_NAMESPACE.value, "Kubernetes namespace"
        RAY_SUBMITTER = NameKind.RAY_SUBMITTER.value, "Ray job submitter"

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="identity_overrides")
    orchestrator = models.ForeignKey(
        Orchestrator,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="identity_overrides",
        help_text="Blank: every orchestrator of the kind.",
    )
    kind = models.CharField(max_length=32, choices=Kind.choices)
    name = models.CharField(
        max_length=255,
        help_text="The Slurm user, the gpuportal.io/user label value, namespace/service-account, namespace or "
        "Ray submitter.",
    )
    history = HistoricalRecords()

    class Meta:
        ordering = ["user__username", "kind", "name"]
        constraints = [
            models.UniqueConstraint(
                fields=["user", "orchestrator", "kind", "name"],
                name="one_override_per_name_and_source",
                condition=Q(orchestrator__isnull=False),
            ),
            models.UniqueConstraint(
                fields=["user", "kind", "name"],
                name="one_fleet_wide_override_per_name",
                condition=Q(orchestrator__isnull=True),
            ),
        ]

    def __str__(self) -> str:
        where = self.orchestrator.name if self.orchestrator_id else "every orchestrator"
        return f"{self.kind} {self.name} on {where} -> {self.user}"

    def clean(self) -> None:
        if self.kind not in NAME_SOURCES:
            return  # the field's choices already say so
        errors = {}
        if problem := name_problem(NameKind(self.kind), self.name):
            errors["name"] = problem
        source = NAME_SOURCES[NameKind(self.kind)]
        if self.orchestrator_id and self.orchestrator.kind != source:
            errors["kind"] = (
                f"a {self.kind} name comes from a {source} orchestrator; {self.orchestrator.name} is "
                f"{self.orchestrator.kind}"
            )
        if errors:
            raise ValidationError(errors)
