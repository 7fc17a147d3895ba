"""The gpu-priority-expander's decisions: the engine's choice from the fleet's last round, kept for the page.

``serve_expander`` (a gRPC server) decodes cluster-autoscaler's request into ``GrowthOption`` values and asks
``choose``; the targets are the rebalancer's of this moment (its demand per orchestrator: running work plus
pending GPUs weighted by priority and age, from the last collect round) and the pool-policy bounds in force.
"""

from __future__ import annotations

from dataclasses import asdict
from datetime import datetime, timedelta

from django.conf import settings
from django.utils import timezone

from scheduling.engine.expander import ExpanderVerdict, GrowthOption, choose_growth
from scheduling.models import ExpanderDecision
from scheduling.selectors.pool_policies import bounds_now
from scheduling.selectors.rebalance import engine_config

from .rebalance import decide_now


def choose(options: list[GrowthOption], autoscaler: str, default_pool: str, now: datetime | None = None
           ) -> ExpanderVerdict:
    """The node group to grow for these options, recorded with every option's reason."""
    now = now or timezone.now()
    verdict = choose_growth(options, decide_now(now).targets, bounds_now(now), engine_config())
    ExpanderDecision.objects.create(
        autoscaler=autoscaler[:253], default_pool=default_pool[:120], chosen=list(verdict.chosen),
        ranked=[asdict(r) for r in verdict.ranked], summary=verdict.summary[:500],
    )
    return verdict


def prune(now: datetime) -> int:
    kept_until = now - timedelta(days=settings.GPUPORTAL_EXPANDER_RETENTION_DAYS)
    deleted, _ = ExpanderDecision.objects.filter(at__lt=kept_until).delete()
    return deleted
