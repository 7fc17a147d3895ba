"""Pool policies: the calendar rules in the portal's time zone, validated as a whole, edited with who and why.

A rule is never judged alone: ``check_policies`` runs the engine's ``check_rules`` on every enabled rule
as it would be after the edit, so two floors that cannot hold at the same moment are refused with the
field (``floor_gpus``) and the rules that overlap named in the message.
"""

from django.core.exceptions import ValidationError
from django.db import transaction

from scheduling.engine.calendar import check_rules
from scheduling.models import PoolPolicy
from scheduling.selectors.fleet import fleet_capacity
from scheduling.selectors.pool_policies import rule_of

from . import versions
from .audit import require_reason, save_audited, stamp_author


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
def save_policy(policy: PoolPolicy, *, by, reason: str, seen_version: int | None = None) -> PoolPolicy:
    """Create or edit a rule after checking the whole calendar; the history row keeps who and why.
    ``seen_version``: the rule's version the edit was made on; a rule saved since refuses it."""
    reason = require_reason(reason)
    if policy.pk is not None:
        locked = PoolPolicy.objects.select_for_update().get(pk=policy.pk)
        versions.require_version(locked, seen_version, f"Policy {locked}")
        policy.version = locked.version
    errors = check_policies(changed=policy)
    if errors:
        raise ValidationError(errors)
    save_audited(policy, by=by, reason=reason)
    return policy


@transaction.atomic
def delete_policy(policy: PoolPolicy, *, by, reason: str) -> None:
    stamp_author(policy, by=by, reason=reason)
    policy.delete()
