"""Pool policies: the calendar rules in the portal's time zone, validated as a whole, edited with who and why.

A rule is never judged alone: ``check_policies`` runs the engine's ``check_rules`` on every enabled rule
as it would be after the edit, so two floors that cannot hold at the same moment are refused with the
field (``floor_gpus``) and the rules that overlap named in the message.
"""

from datetime import datetime
from zoneinfo import ZoneInfo

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Sum
from django.utils import timezone

from scheduling.engine.calendar import Bounds, PolicyRule, bounds_ahead, bounds_at, check_rules
from scheduling.models import Node, PoolPolicy

from .audit import require_reason, save_audited, stamp_author


def local_moment(now: datetime | None = None) -> tuple[int, int]:
    """(ISO weekday, minute of day) of ``now`` in settings.TIME_ZONE: the engine's view of the calendar."""
    local = (now or timezone.now()).astimezone(ZoneInfo(settings.TIME_ZONE))
    return local.isoweekday(), local.hour * 60 + local.minute


def rule_of(policy: PoolPolicy, orchestrator_name: str | None = None) -> PolicyRule:
    """The engine's rule for a policy row (``orchestrator_name`` spares the lookup for historical rows)."""
    return PolicyRule(
        name=policy.name,
        orchestrator=orchestrator_name or policy.orchestrator.name,
        weekdays=frozenset(int(d) for d in policy.weekdays or () if str(d).lstrip("-").isdigit()),
        start_minute=policy.start_time.hour * 60 + policy.start_time.minute,
        end_minute=policy.end_time.hour * 60 + policy.end_time.minute,
        floor_gpus=policy.floor_gpus,
        ceiling_gpus=policy.ceiling_gpus,
        lendable=policy.lendable,
        precedence=policy.precedence,
    )


def enabled_rules() -> list[PolicyRule]:
    return [rule_of(p) for p in PoolPolicy.objects.filter(enabled=True).select_related("orchestrator")]


def bounds_now(now: datetime | None = None, lead_s: float = 0.0) -> dict[str, Bounds]:
    """Bounds in force now; with ``lead_s``, floors starting within it count already (drains take time)."""
    weekday, minute = local_moment(now)
    if lead_s > 0:
        return bounds_ahead(enabled_rules(), weekday, minute, int(lead_s // 60))
    return bounds_at(enabled_rules(), weekday, minute)


def fleet_capacity() -> int:
    """GPUs the floors share: every node that is not down."""
    return Node.objects.exclude(state=Node.State.DOWN).aggregate(total=Sum("gpu_total"))["total"] or 0


def check_policies(changed: PoolPolicy | None = None, removed: PoolPolicy | None = None) -> dict[str, list[str]]:
    """Errors by field of the enabled rules as they would be after saving ``changed`` (or deleting ``removed``)."""
    others = PoolPolicy.objects.filter(enabled=True).select_related("orchestrator")
    for skip in (changed, removed):
        if skip is not None and skip.pk:
            others = others.exclude(pk=skip.pk)
    rules = [rule_of(p) for p in others]
    if changed is not None and changed.enabled:
        rules.append(rule_of(changed))
    names = [r.name for r in rules]
    errors: dict[str, list[str]] = {}
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        errors.setdefault("name", []).append(f"rule names must be unique: {', '.join(duplicates)}")
    for problem in check_rules(rules, fleet_capacity()):
        if changed is None or changed.name in problem.rules:
            errors.setdefault(problem.field, []).append(problem.message)
    return errors


@transaction.atomic
def save_policy(policy: PoolPolicy, *, by, reason: str) -> PoolPolicy:
    """Create or edit a rule after checking the whole calendar; the history row keeps who and why."""
    reason = require_reason(reason)
    errors = check_policies(changed=policy)
    if errors:
        raise ValidationError(errors)
    save_audited(policy, by=by, reason=reason)
    return policy


@transaction.atomic
def delete_policy(policy: PoolPolicy, *, by, reason: str) -> None:
    stamp_author(policy, by=by, reason=reason)
    policy.delete()
