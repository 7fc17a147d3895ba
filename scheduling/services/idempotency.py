"""Idempotency keys (the API's ``Idempotency-Key`` header, the request form's hidden field): a write sent twice
with the same key by the same user is done once; the second gets the first answer.

The key row is written in the same transaction as the work, so both commit or neither does (a refused request
leaves its key free for the corrected retry). Two requests with one key at once: the second's insert waits on the
unique index until the first commits, fails, and then replays the first's answer. Keys live ``KEEP``; an
expired key is free again, and ``purge_expired`` (a beat task) deletes old rows.
"""

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.core.serializers.json import DjangoJSONEncoder
from django.db import IntegrityError, transaction
from django.utils import timezone

from scheduling.models import IdempotencyKey, QuotaRequest

KEEP = timedelta(days=1)


class KeyReused(Exception):
    """The key was used by this user for a different request: a client error, not a replay."""


@dataclass(frozen=True)
class Outcome:
    status_code: int
    response: Any
    quota_request_id: int | None
    replayed: bool


# What the work returns: the answer's status and body, and the quota request it created (if any).
Work = Callable[[], tuple[int, Any, QuotaRequest | None]]


def fingerprint(*parts: Any) -> str:
    """A digest of what was asked (method, path, body): equal for the same request sent again."""
    text = json.dumps(parts, sort_keys=True, cls=DjangoJSONEncoder, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def once(user, key: str, asked: str, work: Work) -> Outcome:
    """Run ``work`` unless ``key`` was used by ``user`` within ``KEEP``; then the stored outcome, if it was for
    the same request (``asked``), else KeyReused."""
    earlier = _earlier(user, key)
    if earlier is None:
        try:
            with transaction.atomic():
                status_code, response, made = work()
                _record(user, key, asked, status_code, response, made)
            return Outcome(status_code, response, made.pk if made else None, replayed=False)
        except IntegrityError:
            earlier = _earlier(user, key)  # a twin with this key committed first
            if earlier is None:
                raise
    if earlier.fingerprint != asked:
        raise KeyReused(f"was used within the last {KEEP.days * 24} hours for a different request; send a new key")
    return Outcome(earlier.status_code, earlier.response, earlier.quota_request_id, replayed=True)


def _earlier(user, key: str) -> IdempotencyKey | None:
    return IdempotencyKey.objects.filter(user=user, key=key, created_at__gte=timezone.now() - KEEP).first()


def _record(user, key: str, asked: str, status_code: int, response: Any, made: QuotaRequest | None) -> None:
    # An expired key is free again. Only expired rows: a twin's row committed since ``_earlier`` must stay and
    # make this insert fail (then the caller replays it).
    IdempotencyKey.objects.filter(user=user, key=key, created_at__lt=timezone.now() - KEEP).delete()
    IdempotencyKey.objects.create(
        user=user, key=key, fingerprint=asked, status_code=status_code, response=response, quota_request=made
    )


def purge_expired(now: datetime | None = None) -> int:
    """Delete keys older than ``KEEP``; returns how many."""
    return IdempotencyKey.objects.filter(created_at__lt=(now or timezone.now()) - KEEP).delete()[0]
