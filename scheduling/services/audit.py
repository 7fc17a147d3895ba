"""Who and why on every governance change (django-simple-history rows)."""

from django.core.exceptions import ValidationError
from django.db import models

from scheduling.limits import COMMENT_MAX_CHARS, NUL, NUL_RULE


def require_reason(reason: str) -> str:
    reason = (reason or "").strip()
    if not reason:
        raise ValidationError(
            {"reason": "A reason is required: every change of quota, share, policy or pool is audited."}
        )
    # The forms and the API check these first; some pages pass a reason straight from the POST.
    if len(reason) > COMMENT_MAX_CHARS:
        raise ValidationError({"reason": f"at most {COMMENT_MAX_CHARS} characters, got {len(reason)}."})
    if NUL in reason:
        raise ValidationError({"reason": NUL_RULE})
    return reason


def stamp_author(instance: models.Model, *, by, reason: str) -> None:
    """Record who and why in the history row the next save or delete of ``instance`` writes."""
    instance._history_user = by  # type: ignore[attr-defined]
    instance._change_reason = require_reason(reason)  # type: ignore[attr-defined]


def save_audited(instance: models.Model, *, by, reason: str) -> None:
    """Validate and save with the author and the reason recorded in the instance's history row."""
    stamp_author(instance, by=by, reason=reason)
    instance.full_clean()
    instance.save()
