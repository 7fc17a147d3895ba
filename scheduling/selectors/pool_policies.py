"""Pool policies as the engine reads them: the calendar rules in force, in the portal's time zone."""

from datetime import datetime
from zoneinfo import ZoneInfo

from django.conf import settings
from django.utils import timezone

from scheduling.engine.calendar import Bounds, PolicyRule, bounds_ahead, bounds_at
from scheduling.models import PoolPolicy


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
