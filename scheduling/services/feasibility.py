"""Would a quota request fit? The same arithmetic approval uses, explained before anyone decides."""

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import Sum
from django.utils import timezone

from scheduling.models import Queue, QuotaGrant, Team
from scheduling.selectors.fleet import fleet_capacity

from .capacity import LIVE_GRANT_STATES, check_new_promise, earliest_start, refusal


@dataclass(frozen=True)
class WhatFits:
    """After a refusal, what would pass the same check: the most GPUs over the period asked (0: none), and the
    earliest period of the same length for the GPUs asked (None: none starts within the lead time allowed)."""

    largest: int
    earliest: tuple[datetime, datetime] | None
    horizon_days: int


@dataclass(frozen=True)
class Feasibility:
    fits: bool
    messages: list[tuple[str, str]] = field(default_factory=list)  # (tone: ok | warn | bad, text)
    what_fits: WhatFits | None = None


def what_would_fit(
    gpus: int, gpu_model: str, starts_at: datetime, ends_at: datetime, room: int, exclude_request: int | None = None
) -> WhatFits:
    """The largest amount that fits the period (the check's room) and the earliest period the amount fits, no
    later than the latest start a request may have (``GPUPORTAL_QUOTA_MAX_LEAD_DAYS`` from now)."""
    days = settings.GPUPORTAL_QUOTA_MAX_LEAD_DAYS
    latest = timezone.now() + timedelta(days=days)
    start = earliest_start(gpus, gpu_model, starts_at, ends_at, latest, exclude_request)
    if start is not None and (start.second or start.microsecond):
        start = start.replace(second=0, microsecond=0) + timedelta(minutes=1)  # the form's fields hold minutes
    period = (start, start + (ends_at - starts_at)) if start is not None else None
    return WhatFits(max(room, 0), period, days)


def _period(starts_at: datetime, ends_at: datetime) -> str:
    return f"from {starts_at:%b %d %H:%M} to {ends_at:%b %d %H:%M}"


def check_request(
    team: Team, gpus: int, gpu_model: str, starts_at: datetime, ends_at: datetime, exclude_request: int | None = None
) -> Feasibility:
    """Fleet headroom (hard: approval refuses beyond it, by the same check) and the top-level team's fair share
    (soft)."""
    model = gpu_model or "fleet"
    messages: list[tuple[str, str]] = []
    capacity = fleet_capacity(gpu_model)
    check = check_new_promise(gpus, gpu_model, starts_at, ends_at, exclude_request=exclude_request)
    free, fits = check.room, check.fits
    if capacity == 0:
        messages.append(("bad", f"The fleet has no {model} GPUs."))
        fits = False
    elif fits:
        messages.append(
            (
                "ok",
                f"Fits the unpromised {model} capacity {_period(starts_at, ends_at)}: {free} of "
                f"{capacity} GPUs are not yet guaranteed or granted, {free - gpus} would remain.",
            )
        )
    else:
        messages.append(
            (
                "bad",
                f"Exceeds free {model} capacity {_period(starts_at, ends_at)} by {gpus - free} GPUs ({free} of "
                f"{capacity} unpromised): {refusal(check)}; approval would be refused.",
            )
        )
    fits_instead = None
    if not fits and capacity:
        fits_instead = what_would_fit(gpus, gpu_model, starts_at, ends_at, free, exclude_request)
    tree = Team.objects.tree()
    top = tree.ancestors(team.pk)
    root = tree.teams[top[-1]] if top else team
    queue = Queue.objects.filter(team=root, gpu_model="").first()
    fleet = fleet_capacity("")
    if queue is not None and fleet:
        # A team's weight is a share of the whole fleet (its guarantee is any-model), so the share is counted
        # against every GPU, whatever model this request names: the sum below then adds up as written.
        share = float(queue.weight) / 100 * fleet
        granted = (
            QuotaGrant.objects.filter(
                state__in=LIVE_GRANT_STATES,
                starts_at__lt=ends_at,
                ends_at__gt=starts_at,
                team__in=tree.subtree(root.pk),
            ).aggregate(total=Sum("gpus"))["total"]
            or 0
        )
        used = queue.guaranteed + granted + gpus
        sum_text = (
            f"{queue.guaranteed} guaranteed + {granted} granted {_period(starts_at, ends_at)} + {gpus} requested "
            f"= {used}"
        )
        share_text = f"{root.slug}'s {float(queue.weight):g} % of the fleet's {fleet} GPUs ({share:.0f})"
        if used <= share:
            messages.append(("ok", f"Fits inside {share_text}: {sum_text}."))
        else:
            messages.append(
                (
                    "warn",
                    f"Goes beyond {share_text} by {used - share:.0f} GPUs: {sum_text}. The part above the share is "
                    "borrowed from other teams' fair share; it is still a promise of real GPUs, checked above.",
                )
            )
    return Feasibility(fits, messages, fits_instead)
