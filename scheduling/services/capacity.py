"""How many GPUs exist and what is promised on them: the ORM side of ``scheduling.engine.promises``.

Promises are the queue guarantees no ancestor's guarantee of the same GPU model holds (standing, per GPU model
or any model) and live quota grants (time-bounded). A sub-team's guarantee is carved out of the nearest ancestor's
queue of its model and bounded by it; with no such queue above it (the parent guarantees only another model, or
nothing) it is a promise of its own, counted like a top-level team's.
"""

from collections.abc import Iterable
from datetime import datetime

from django.db.models import Sum

from scheduling.engine.promises import Promise, PromiseCheck, Shortfall, check_promise, earliest_fit, worsened
from scheduling.models import CapacityLock, Node, Queue, QuotaGrant, Team

LIVE_GRANT_STATES = (QuotaGrant.State.SCHEDULED, QuotaGrant.State.ACTIVE)


def lock_capacity(scope: str = "quota") -> None:
    """Serialise everything that adds promises (approvals, guarantee edits) until the transaction ends, so
    each sees the others' writes. Call inside ``transaction.atomic``, before reading any promise. Another
    ``scope`` is another lock on the same table (e.g. "governance-round")."""
    CapacityLock.objects.get_or_create(scope=scope)
    CapacityLock.objects.select_for_update().get(scope=scope)


def gpu_supply() -> dict[str, int]:
    """GPUs per model on nodes that are not down: what promises can be served by."""
    rows = Node.objects.serving().values("gpu_model").annotate(total=Sum("gpu_total")).values_list("gpu_model", "total")
    return {model: total or 0 for model, total in rows}


Parents = dict[int, int | None]


def team_parents(queues: Iterable[Queue] = (), moved: Parents | None = None) -> Parents:
    """Team id -> parent id: the stored tree, with the parents the ``queues``' teams carry (unsaved edits) and
    ``moved`` (a re-parenting being checked) on top."""
    parents: Parents = dict(Team.objects.values_list("pk", "parent_id"))
    parents.update({q.team_id: q.team.parent_id for q in queues if q.team_id is not None})
    parents.update(moved or {})
    return parents


def carving_queue(queue: Queue, by_team: dict[tuple[int, str], Queue], parents: Parents) -> Queue | None:
    """The queue ``queue``'s guarantee is carved out of: the nearest ancestor's of the same GPU model (None: its
    guarantee is a promise of its own). A cycle in ``parents`` ends the walk (the tree check refuses it)."""
    seen: set[int] = set()
    parent = parents.get(queue.team_id)
    while parent is not None and parent not in seen:
        seen.add(parent)
        found = by_team.get((parent, queue.gpu_model))
        if found is not None:
            return found
        parent = parents.get(parent)
    return None


def standing_guarantees(queues: list[Queue] | None = None, parents: Parents | None = None) -> list[Promise]:
    """The guarantees no ancestor's queue of the same model holds (of ``queues``, unsaved edits included; else
    as stored), one standing promise each."""
    if queues is None:
        queues = list(Queue.objects.select_related("team"))
    parents = team_parents(queues) if parents is None else parents
    by_team = {(q.team_id, q.gpu_model): q for q in queues}
    return [
        Promise(q.guaranteed, q.gpu_model)
        for q in queues
        if q.guaranteed > 0 and carving_queue(q, by_team, parents) is None
    ]


def live_grants(
    starts_at: datetime, ends_at: datetime | None = None, exclude_request: int | None = None
) -> list[Promise]:
    """Scheduled and active grants overlapping ``[starts_at, ends_at)``, as time-bounded promises."""
    grants = QuotaGrant.objects.filter(state__in=LIVE_GRANT_STATES, ends_at__gt=starts_at)
    if ends_at is not None:
        grants = grants.filter(starts_at__lt=ends_at)
    if exclude_request is not None:
        grants = grants.exclude(request_id=exclude_request)
    rows = grants.values_list("gpus", "gpu_model", "starts_at", "ends_at")
    return [Promise(gpus, model, start, end) for gpus, model, start, end in rows]


def check_new_promise(
    gpus: int, gpu_model: str, starts_at: datetime, ends_at: datetime, exclude_request: int | None = None
) -> PromiseCheck:
    """Could real GPUs serve ``gpus`` more of ``gpu_model`` ('' = any) over the period on top of every
    guarantee and live grant? Approval and the feasibility shown before it both ask this, so they agree."""
    promises = standing_guarantees() + live_grants(starts_at, ends_at, exclude_request)
    return check_promise(gpu_supply(), promises, Promise(gpus, gpu_model, starts_at, ends_at))


def earliest_start(
    gpus: int, gpu_model: str, starts_at: datetime, ends_at: datetime, latest_start: datetime,
    exclude_request: int | None = None,
) -> datetime | None:
    """The earliest start, from ``starts_at`` to ``latest_start``, at which the same request kept as long would
    pass ``check_new_promise`` (the engine's ``earliest_fit`` over every guarantee and live grant from then on)."""
    promises = standing_guarantees() + live_grants(starts_at, None, exclude_request)
    return earliest_fit(gpu_supply(), promises, Promise(gpus, gpu_model, starts_at, ends_at), latest_start)


def guarantee_shortfalls(queues: list[Queue], now: datetime, parents: Parents | None = None) -> list[Shortfall]:
    """What replacing the stored guarantees and tree by ``queues`` and ``parents`` (the whole tree after an
    edit) would leave unservable from ``now`` on, with every live grant, that the stored ones do not."""
    grants = live_grants(now)
    before, after = standing_guarantees() + grants, standing_guarantees(queues, parents) + grants
    return worsened(gpu_supply(), before, after, now)


def refusal(check: PromiseCheck) -> str:
    """Where the promise breaks, and how many other intervals it breaks too."""
    worst = check.worst()
    if worst is None:
        return ""
    others = len({s.starts_at for s in check.shortfalls}) - 1
    return worst.sentence() + (f" (and {others} more interval{'s' if others > 1 else ''})" if others else "")
