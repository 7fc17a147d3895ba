"""Fair share: hierarchical weighted max-min with guaranteed floors and burst caps, usage decay,
fair-share ordering of the pending queue, and Jain's index.

The model is Kueue's (nominal quota, borrowing, lending) and YuniKorn's (guaranteed / max) put into
one water-filling rule per level of the team tree:

1. every team first gets its guaranteed floor, as far as it has demand (a floor is never lent away
   while its owner wants it; an idle floor is lent, and reclaimed by preemption later);
2. what is left is shared by *weighted max-min*: allocations rise together in proportion to weight
   (``allocation / weight`` is levelled), each stopping at ``min(demand, burst_limit)``;
3. capacity nobody with weight can use goes to teams with demand but no weight (idle capacity is
   never wasted while someone can use it);
4. a team's allocation is then divided among its children the same way.

Floors count towards the level (a team with a big guarantee is not also given a full weighted share
on top), and when guarantees exceed capacity they are scaled down together, which is reported.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from operator import attrgetter

from scheduling.engine.types import Entitlement, Request, TeamSpec
from scheduling.wording import plural

OWN_WORK = "(own)"
EPSILON = 1e-9


@dataclass(slots=True)
class _Claim:
    """One sibling's position in a water-filling round."""

    name: str
    weight: float
    floor: float
    cap: float
    allocation: float = 0.0
    notes: list[str] = field(default_factory=list)


def _share_out(amount: float, claims: Sequence[_Claim]) -> None:
    """Fill ``claims`` with ``amount``: floors first, then weighted max-min, then unweighted leftovers."""
    floors = sum(claim.floor for claim in claims)
    scale = 1.0 if floors <= amount or floors == 0 else amount / floors
    for claim in claims:
        claim.allocation = claim.floor * scale
        if scale < 1.0 and claim.floor:
            claim.notes.append(f"guarantees exceed capacity: floor scaled to {scale:.0%}")
    rest = amount - sum(claim.allocation for claim in claims)
    weighted = [claim for claim in claims if claim.weight > 0]
    rest -= _level(weighted, rest, lambda claim: claim.weight)
    unweighted = [claim for claim in claims if claim.weight <= 0 and claim.allocation < claim.cap]
    _level(unweighted, rest, lambda claim: 1.0)


def _level(claims: Sequence[_Claim], amount: float, weight_of: Callable[[_Claim], float]) -> float:
    """Raise ``allocation / weight`` to one common level using at most ``amount``; return what was used.

    The total as a function of the level is piecewise linear, so the exact level is found by walking
    the sorted breakpoints (where a claim starts rising above its floor, and where it hits its cap).
    """
    if amount <= 0 or not claims:
        return 0.0
    weights = [weight_of(claim) for claim in claims]
    floors = [claim.allocation for claim in claims]
    caps = [max(claim.cap, claim.allocation) for claim in claims]

    def total_at(level: float) -> float:
        return sum(min(max(w * level, f), c) for w, f, c in zip(weights, floors, caps, strict=True))

    points = sorted({f / w for f, w in zip(floors, weights, strict=True)}
                    | {c / w for c, w in zip(caps, weights, strict=True)})
    target = sum(floors) + amount
    level = points[-1]  # enough for everyone to reach their cap, unless a breakpoint below suffices
    previous = points[0]
    for point in points:
        if total_at(point) >= target:
            # Claims rising between two breakpoints are those strictly inside their range at the midpoint
            # (testing at a breakpoint itself is at the mercy of rounding).
            middle = (previous + point) / 2
            rising = sum(w for w, f, c in zip(weights, floors, caps, strict=True) if f < w * middle < c)
            level = min(point, previous + (target - total_at(previous)) / rising) if rising else point
            break
        previous = point
    used = 0.0
    for claim, w, f, c in zip(claims, weights, floors, caps, strict=True):
        claim.allocation = min(max(w * level, f), c)
        used += claim.allocation - f
    if used > amount:  # floating-point overshoot: take it back from the largest gainer
        gainer = max(claims, key=lambda claim: claim.allocation)
        gainer.allocation -= used - amount
        used = amount
    return used


@dataclass(slots=True)
class _Tree:
    specs: dict[str, TeamSpec]
    children: dict[str | None, list[str]]
    demand: dict[str, float]
    floor: dict[str, float]


def _build_tree(teams: Sequence[TeamSpec], demand: Mapping[str, float]) -> _Tree:
    specs = {team.name: team for team in teams}
    children: dict[str | None, list[str]] = {}
    for team in teams:
        parent = team.parent if team.parent in specs and team.parent != team.name else None
        children.setdefault(parent, []).append(team.name)
    tree = _Tree(specs, children, {}, {})
    for root in children.get(None, []):
        _sum_up(tree, root, demand, depth=0)
    return tree


def _sum_up(tree: _Tree, name: str, demand: Mapping[str, float], depth: int) -> None:
    """Subtree demand, and the subtree floor: the larger of a team's own guarantee and its children's."""
    if depth > len(tree.specs):
        raise ValueError(f"team tree has a cycle through {name}")
    spec = tree.specs[name]
    total = max(0.0, demand.get(name, 0.0))
    child_floors = 0.0
    for child in tree.children.get(name, []):
        _sum_up(tree, child, demand, depth + 1)
        total += tree.demand[child]
        child_floors += tree.floor[child]
    tree.demand[name] = total
    limit = spec.burst_limit if spec.burst_limit is not None else math.inf
    tree.floor[name] = min(max(float(spec.guaranteed), child_floors), total, limit)


def entitlements(
    teams: Sequence[TeamSpec],
    capacity: float,
    demand: Mapping[str, float],
    allocation: Mapping[str, float] | None = None,
) -> tuple[Entitlement, ...]:
    """What each team is entitled to now, given its (subtree) demand; one Entitlement per team.

    ``demand`` is GPUs wanted (running plus pending) per team; ``allocation`` (optional) is what each
    team holds now, copied into ``Entitlement.in_use`` so preemption can see who is borrowing. For
    per-model quotas, call once per GPU model with the teams of that model.
    """
    tree = _build_tree(teams, demand)
    held = allocation or {}
    results: dict[str, Entitlement] = {}
    _distribute(tree, None, capacity, _Frame(capacity, capacity, 1.0), held, results)
    unreachable = sorted(team.name for team in teams if team.name not in results)
    if unreachable:
        raise ValueError(f"teams in a parent cycle (no path to a root): {', '.join(unreachable)}")
    return tuple(results[team.name] for team in teams if team.name in results)


@dataclass(frozen=True, slots=True)
class _Frame:
    """What a level of the tree inherits: the fleet capacity, the parent's limit and fair fraction."""

    capacity: float
    limit: float
    fraction: float


def _distribute(
    tree: _Tree, parent: str | None, amount: float, frame: _Frame,
    held: Mapping[str, float], results: dict[str, Entitlement],
) -> None:
    names = tree.children.get(parent, [])
    if not names:
        return
    claims = [_claim_for(tree, name, frame.limit) for name in names]
    if parent is not None:
        own = tree.demand[parent] - sum(tree.demand[name] for name in names)
        if own > EPSILON:  # the parent's own jobs compete like one more child of average weight
            average = sum(c.weight for c in claims) / len(claims)
            claims.append(_Claim(OWN_WORK, average, 0.0, own))
    _share_out(amount, claims)
    total_weight = sum(max(0.0, tree.specs[n].weight) for n in names)
    for claim in claims:
        if claim.name == OWN_WORK:
            continue
        spec = tree.specs[claim.name]
        fraction = frame.fraction * (spec.weight / total_weight if total_weight > 0 else 1 / len(names))
        limit = min(frame.limit, spec.burst_limit) if spec.burst_limit is not None else frame.limit
        results[claim.name] = Entitlement(
            team=claim.name, guaranteed=float(spec.guaranteed), fair_share=fraction * frame.capacity,
            limit=float(limit), demand=float(tree.demand[claim.name]), allocation=float(claim.allocation),
            reasons=tuple(claim.notes + _explain(tree, claim, held)),
            in_use=float(held.get(claim.name, 0.0)),
        )
        child_frame = _Frame(frame.capacity, limit, fraction)
        _distribute(tree, claim.name, claim.allocation, child_frame, held, results)


def _claim_for(tree: _Tree, name: str, limit: float) -> _Claim:
    spec = tree.specs[name]
    cap = min(tree.demand[name], limit if spec.burst_limit is None else min(limit, spec.burst_limit))
    return _Claim(name, max(0.0, spec.weight), min(tree.floor[name], cap), cap)


def _explain(tree: _Tree, claim: _Claim, held: Mapping[str, float]) -> list[str]:
    spec = tree.specs[claim.name]
    notes: list[str] = []
    demand = tree.demand[claim.name]
    if claim.floor and claim.floor < spec.guaranteed - EPSILON:
        # The guarantee reserves no more than is wanted (or the limit allows): say both figures.
        bound = f"its demand is {demand:g}" if claim.floor >= demand - EPSILON else "its limit"
        notes.append(f"guarantee {spec.guaranteed:g} GPUs: {claim.floor:g} of it claimed first ({bound})")
    elif claim.floor:
        notes.append(f"guarantee {claim.floor:g} GPUs honoured first")
    capped = spec.burst_limit is not None and claim.allocation >= spec.burst_limit - EPSILON
    if capped and demand > claim.allocation + EPSILON:
        notes.append(f"capped at burst limit {spec.burst_limit}")
    if claim.allocation >= demand - EPSILON:
        notes.append(_entitled_to_all(demand, _subtree_sum(tree, claim.name, held) if held else None))
    elif claim.allocation > claim.floor + EPSILON:
        notes.append(f"weight {spec.weight:g} gives {claim.allocation - claim.floor:g} GPUs above the floor")
    if claim.name in held:
        over = held[claim.name] - max(claim.allocation, float(spec.guaranteed))
        if over > EPSILON:
            notes.append(f"holds {held[claim.name]:g} GPUs, {over:g} above its entitlement (reclaimable)")
    return notes


def _subtree_sum(tree: _Tree, name: str, values: Mapping[str, float]) -> float:
    """A team's figure summed with its sub-teams' (demand is a subtree's; what is held must be too)."""
    return values.get(name, 0.0) + sum(_subtree_sum(tree, child, values) for child in tree.children.get(name, []))


def _entitled_to_all(demand: float, running: float | None) -> str:
    """Entitled to all of its demand; what of it still waits is waiting for room, not for share (the preview
    once said "fully served" beside 14 GPUs pending)."""
    if running is None or running >= demand - EPSILON:
        return f"entitled to all of its demand ({plural(demand, 'GPU')})"
    return (
        f"entitled to all of its demand ({plural(demand, 'GPU')}): {running:g} running, {demand - running:g} pending "
        "(waiting for free GPUs, not for share)"
    )


def decayed_usage(samples: Sequence[tuple[float, float]], now: float, half_life_s: float) -> float:
    """Usage with exponential decay (Slurm PriorityDecayHalfLife): each (time, amount) sample counts
    ``amount * 0.5 ** (age / half_life_s)``; samples from the future count fully rather than more."""
    if half_life_s <= 0:
        raise ValueError("half_life_s must be positive")
    return float(sum(amount * 0.5 ** (max(0.0, now - at) / half_life_s) for at, amount in samples))


def usage_ratio(usage: float, share: float) -> float:
    """Usage per unit of share: 0 for an idle team, infinite for a team with no share at all."""
    if share > 0:
        return usage / share
    return math.inf


def order_pending(
    requests: Sequence[Request],
    usage_by_team: Mapping[str, float],
    entitlement_by_team: Mapping[str, Entitlement] | Mapping[str, float],
) -> tuple[Request, ...]:
    """Pending work in fair-share order (Slurm Fair Tree, KAI): teams with the least usage per share
    first, then higher priority, then earlier submission, then id (so the order is total).

    ``entitlement_by_team`` gives each team's share, as an Entitlement (the larger of its ``fair_share``
    and ``guaranteed``) or a number; a team without a share goes after every team that has one.
    """
    ratio = team_ratios({request.team for request in requests}, usage_by_team, entitlement_by_team)
    # Equivalent to one sort on (ratio, -priority, submitted_at, id); stable sorts from the least
    # significant key up, with C-level key getters, take half the time on a 60,000-job queue.
    ordered = sorted(requests, key=attrgetter("id"))
    ordered.sort(key=attrgetter("submitted_at"))
    ordered.sort(key=attrgetter("priority"), reverse=True)  # reverse sorts stay stable
    ordered.sort(key=lambda request: ratio[request.team])
    return tuple(ordered)


def team_ratios(
    teams: Iterable[str],
    usage_by_team: Mapping[str, float],
    entitlement_by_team: Mapping[str, Entitlement] | Mapping[str, float],
) -> dict[str, float]:
    """Each team's usage per share, the first key of the fair-share order (see ``order_pending``)."""
    ratio: dict[str, float] = {}
    for team in teams:
        entry = entitlement_by_team.get(team)
        # A guarantee is a share too: a weightless team with a floor still ranks by usage against it.
        share = max(entry.fair_share, entry.guaranteed) if isinstance(entry, Entitlement) else float(entry or 0.0)
        ratio[team] = usage_ratio(usage_by_team.get(team, 0.0), share)
    return ratio


def jain_index(values: Sequence[float]) -> float:
    """Jain's fairness index (sum x)^2 / (n sum x^2): 1 when all equal, 1/n when one takes everything.

    Feed it share-normalised usage (``usage / share`` per team) to measure fair share, not raw usage.
    """
    if not values:
        return 1.0
    squares = sum(value * value for value in values)
    if squares == 0:
        return 1.0
    return sum(values) ** 2 / (len(values) * squares)


def share_normalised(
    usage_by_team: Mapping[str, float], share_by_team: Mapping[str, float]
) -> list[float]:
    """usage / share for every team with a positive share (what Jain's index should see)."""
    shares = sorted(share_by_team.items())
    return [usage_by_team.get(team, 0.0) / share for team, share in shares if share > 0]
