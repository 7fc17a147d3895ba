"""Idempotency keys: one write per key, whatever the client sends twice."""

from django.conf import settings
from django.core.serializers.json import DjangoJSONEncoder
from django.db import models
from django.utils import timezone


class IdempotencyKey(models.Model):
    """A client's key for one write (the API's ``Idempotency-Key`` header, the request form's hidden field).

    The same key from the same user within a day gets the first answer again instead of doing the write twice
    (a double-click, a client retrying after a timeout). ``fingerprint`` is a hash of what was asked: the same
    key with a different body is a client error (422), not a replay. Written in the write's own transaction,
    so a key is never stored for work that rolled back. ``services/idempotency.py`` reads and writes it.
    """

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    key = models.CharField(max_length=255)
    fingerprint = models.CharField(max_length=64)
    status_code = models.PositiveSmallIntegerField()
    response = models.JSONField(default=dict, blank=True, encoder=DjangoJSONEncoder)
    quota_request = models.ForeignKey("scheduling.QuotaRequest", null=True, blank=True, on_delete=models.CASCADE)
    created_at = models.DateTimeField(default=timezone.now, db_index=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["user", "key"], name="one_idempotency_key_per_user")]

    def __str__(self) -> str:
        return f"{self.user_id}:{self.key}"
