"""How many GPUs exist and what is promised on them: the ORM side of ``scheduling.engine.promises``.

Promises are the top-level teams' queue guarantees (standing, per GPU model or any model) and live quota
grants (time-bounded). Sub-teams' guarantees are carved out of their parent's, so only top-level ones count.
"""

from datetime import datetime

from django.db.models import Sum

from scheduling.engine.promises import Promise, PromiseCheck, check_promise
from scheduling.models import Node, Queue, QuotaGrant

LIVE_GRANT_STATES = (QuotaGrant.State.SCHEDULED, QuotaGrant.State.ACTIVE)


def _serving_nodes():
    return Node.objects.exclude(state=Node.State.DOWN)


def fleet_capacity(gpu_model: str = "") -> int:
    nodes = _serving_nodes()
    if gpu_model:
        nodes = nodes.filter(gpu_model=gpu_model)
    return nodes.aggregate(total=Sum("gpu_total"))["total"] or 0


def gpu_supply() -> dict[str, int]:
    """GPUs per model on nodes that are not down: what promises can be served by."""
    rows = _serving_nodes().values("gpu_model").annotate(total=Sum("gpu_total")).values_list("gpu_model", "total")
    return {model: total or 0 for model, total in rows}


def standing_guarantees() -> list[Promise]:
    """The top-level teams' guarantees, one standing promise per GPU model ('' = any model)."""
    rows = (
        Queue.objects.filter(team__parent__isnull=True, guaranteed__gt=0)
        .values("gpu_model")
        .annotate(total=Sum("guaranteed"))
        .values_list("gpu_model", "total")
    )
    return [Promise(total, model) for model, total in rows]


def live_grants(starts_at: datetime, ends_at: datetime, exclude_request: int | None = None) -> list[Promise]:
    """Scheduled and active grants overlapping ``[starts_at, ends_at)``, as time-bounded promises."""
    grants = QuotaGrant.objects.filter(state__in=LIVE_GRANT_STATES, starts_at__lt=ends_at, ends_at__gt=starts_at)
    if exclude_request is not None:
        grants = grants.exclude(request_id=exclude_request)
    rows = grants.values_list("gpus", "gpu_model", "starts_at", "ends_at")
    return [Promise(gpus, model, start, end) for gpus, model, start, end in rows]


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


def check_new_promise(
    gpus: int, gpu_model: str, starts_at: datetime, ends_at: datetime, exclude_request: int | None = None
) -> PromiseCheck:
    """Could real GPUs serve ``gpus`` more of ``gpu_model`` ('' = any) over the period on top of every
    guarantee and live grant? Approval and the feasibility shown before it both ask this, so they agree."""
    promises = standing_guarantees() + live_grants(starts_at, ends_at, exclude_request)
    return check_promise(gpu_supply(), promises, Promise(gpus, gpu_model, starts_at, ends_at))


def refusal(check: PromiseCheck) -> str:
    """Where the promise breaks, and how many other intervals it breaks too."""
    worst = check.worst()
    if worst is None:
        return ""
    others = len({s.starts_at for s in check.shortfalls}) - 1
    return worst.sentence() + (f" (and {others} more interval{'s' if others > 1 else ''})" if others else "")
