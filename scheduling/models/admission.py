from django.db import models


class AdmissionDecision(models.Model):
    """One answer of the mutating admission webhook: who created what, where it was sent and why.

    Kept for every review, allowed or denied, patched or passed through unchanged (an unknown namespace,
    a pod without GPUs), so "why did my pod land on Volcano" can be answered.

    A row with ``bypassed`` is a finding, not an answer: the Kubernetes collector saw a GPU pod in a team
    namespace, created after the webhook was registered, that bears no decision of the webhook (it was down or
    timed out under ``failurePolicy: Ignore``). ``uid`` is then the pod's, ``at`` when it was found, ``scheduler``
    the one the pod asked for and ``pool`` the orchestrator it runs on; one row per pod.
    """

    at = models.DateTimeField(auto_now_add=True, db_index=True)
    uid = models.CharField(max_length=64)
    user = models.CharField(max_length=253, blank=True, help_text="the requesting Kubernetes user")
    namespace = models.CharField(max_length=253, blank=True)
    name = models.CharField(max_length=253, blank=True)
    kind = models.CharField(max_length=64, blank=True)
    team = models.ForeignKey(
        "scheduling.Team", null=True, blank=True, on_delete=models.SET_NULL, related_name="admission_decisions"
    )
    allowed = models.BooleanField()
    patched = models.BooleanField(default=False)
    scheduler = models.CharField(max_length=64, blank=True)
    pool = models.CharField(max_length=120, blank=True)
    message = models.CharField(max_length=500, blank=True)
    reasons = models.JSONField(default=list, blank=True)
    bypassed = models.BooleanField(default=False, help_text="found by the collector: the webhook never answered")

    class Meta:
        ordering = ["-at"]
        constraints = [
            models.UniqueConstraint(fields=["uid"], condition=models.Q(bypassed=True), name="one_bypass_per_pod")
        ]
        indexes = [models.Index(fields=["bypassed", "-at"], name="admission_bypassed_at")]

    def __str__(self) -> str:
        verdict = "bypassed" if self.bypassed else "allowed" if self.allowed else "denied"
        return f"{self.namespace}/{self.name} ({self.kind}): {verdict}"
