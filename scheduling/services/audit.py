"""Who and why on every governance change (django-simple-history rows)."""

from django.core.exceptions import ValidationError
from django.db import models


def require_reason(reason: str) -> str:
    reason = (reason or "").strip()
    if not reason:
        raise ValidationError(
            {"reason": "A reason is required: every change of quota, share, policy or pool is audited."}
        )
    return reason


def save_audited(instance: models.Model, *, by, reason: str) -> None:
    """Save with the author and the reason recorded in the instance's history row."""
    instance._history_user = by  # type: ignore[attr-defined]
    instance._change_reason = require_reason(reason)  # type: ignore[attr-defined]
    instance.full_clean()
    instance.save()
