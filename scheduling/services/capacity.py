"""How many GPUs exist and how many are promised, per GPU model ('' = the whole fleet)."""

from datetime import datetime

from django.db.models import Sum

from scheduling.models import Node, Queue, QuotaGrant

LIVE_GRANT_STATES = (QuotaGrant.State.SCHEDULED, QuotaGrant.State.ACTIVE)


def fleet_capacity(gpu_model: str = "") -> int:
    nodes = Node.objects.exclude(state=Node.State.DOWN)
    if gpu_model:
        nodes = nodes.filter(gpu_model=gpu_model)
    return nodes.aggregate(total=Sum("gpu_total"))["total"] or 0


def top_level_guarantees(gpu_model: str = "", exclude_ids: tuple[int, ...] = ()) -> int:
    queues = Queue.objects.filter(team__parent__isnull=True).exclude(pk__in=exclude_ids)
    if gpu_model:
        queues = queues.filter(gpu_model=gpu_model)
    return queues.aggregate(total=Sum("guaranteed"))["total"] or 0


def peak_granted(gpu_model: str, starts_at: datetime, ends_at: datetime, exclude_request: int | None = None) -> int:
    """The most GPUs that live grants promise at any one moment inside [starts_at, ends_at)."""
    grants = QuotaGrant.objects.filter(state__in=LIVE_GRANT_STATES, starts_at__lt=ends_at, ends_at__gt=starts_at)
    if gpu_model:
        grants = grants.filter(gpu_model=gpu_model)
    if exclude_request is not None:
        grants = grants.exclude(request_id=exclude_request)
    events: list[tuple[datetime, int]] = []
    for start, end, gpus in grants.values_list("starts_at", "ends_at", "gpus"):
        events += [(max(start, starts_at), gpus), (min(end, ends_at), -gpus)]
    peak = current = 0
    for _, delta in sorted(events, key=lambda e: (e[0], e[1])):  # ends before starts at the same instant
        current += delta
        peak = max(peak, current)
    return peak


def headroom(gpu_model: str, starts_at: datetime, ends_at: datetime, exclude_request: int | None = None) -> int:
    """GPUs of ``gpu_model`` still unpromised over the period (guarantees and grants subtracted)."""
    promised = top_level_guarantees(gpu_model) + peak_granted(gpu_model, starts_at, ends_at, exclude_request)
    return fleet_capacity(gpu_model) - promised
