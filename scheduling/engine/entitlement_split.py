"""One fleet, one entitlement: split each team's fleet-wide guarantee and cap across the orchestrators.

A team's queue (weight, guaranteed, burst limit, per GPU model) and its grants are *fleet* figures. Copying
them whole to every orchestrator hands a team its cap once per cluster (burst 8 became caps 12 / 16 / 16)
and writes guarantees no cluster can hold (64 of 48). :func:`split_entitlements` instead divides them each
round by where the team's demand is. Pure: no I/O, no clock (``at`` is passed in).

**Cells.** A cell is one (orchestrator, GPU model) of the fleet with its supply (GPUs in that pool). A team's
queue for a model covers the cells of that model; its any-model queue ("") covers the rest, as
:func:`.governance_state._queue_for` resolves them. A cell no queue of the team covers has no cap of its own
(``cap=None``: its parent's applies), as before.

**Pots.** Each queue is a pot (guaranteed, burst limit) over the cells it covers; each grant in force is a
pot (gpus, gpus) over the team's cells that its orchestrator and model allow. A grant naming an orchestrator
therefore lands there only. Grants to a sub-team are pots of every ancestor too (a parent's cap bounds its
subtree, and its guarantee holds its children's). Fleet guarantee = sum of guarantee pots; fleet cap = sum of
the queue pots' burst limits + grants.

**The split**, top of the tree down, one sibling group at a time:

1. *Guarantees* (jointly for the group, so they fit): each cell offers its supply to root teams, or the
   parent's guarantee on it to children. Every team's guarantee pots cover first the GPUs it runs there, then
   its pending GPUs there, then the rest spreads in proportion to what each cell has left. A guarantee the
   cells cannot hold is short, with the reason.
2. *Caps* (per team): each cap pot covers its own guarantee first, then the running GPUs, then the pending
   GPUs, and the rest spreads over the covered cells in proportion to their room (supply, or the parent's cap
   there: a child never exceeds its parent). So caps summed over the fleet never exceed the fleet cap.
3. *Running is never capped away*: a cell whose share came out below what the team runs there is raised to
   that (``over`` > 0, with the reason). That only happens when a team already runs more than its pots
   allow (Ray has no quota; a cap was lowered under running jobs); reducing it is the reclaim's job, in order.

**Hysteresis** (stated rule): a team's demand on a cell (running, pending) that moved by at most
``HYSTERESIS_FRACTION`` (10 %) of its previous value, rounded down, is read as unchanged, and the previous
value is kept. The split is a pure function of supply, the tree and that effective demand, so with unchanged
inputs it is a fixed point, and small moves of large demands (a 100-GPU backlog becoming 105) do not rewrite
caps; demands under 10 GPUs follow exactly (a 1-GPU job never waits on the band), and a flood (Slurm at 9 am,
Ray overnight) is past the band, so the split follows it within one round. The band applies to the floor too: a
cap is never below what runs, nor below the running figure the band still holds.

**Ray** has no team quota. Its cells are split like the others, so a team's Ray usage counts against its
fleet cap and its Ray share is what the other orchestrators leave free for it there; such shares carry
``enforced=False`` and the reason "observed only": nothing writes them (the pool's autoscaler bounds and the
reclaim's job stop are Ray's levers).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from .governance_state import GovernanceInput, GovGrant, GovQueue, GovTeam
from .types import OrchestratorKind

HYSTERESIS_FRACTION = 0.10
UNBOUNDED = 1 << 40  # "no limit" in the integer arithmetic of the caps
RAY_OBSERVED = "Ray: observed only (Ray has no team quota; nothing writes this share)"

Cell = tuple[str, str]  # (orchestrator, gpu_model)
Key = tuple[str, str, str]  # (team, orchestrator, gpu_model)


# ------------------------------------------------------------------------------------------- input


@dataclass(frozen=True, slots=True)
class Supply:
    """GPUs of one model in one orchestrator's pool (``gpu_model`` "" = the pool's model is not known)."""

    orchestrator: str
    kind: OrchestratorKind
    gpu_model: str
    gpus: int


@dataclass(frozen=True, slots=True)
class Demand:
    """A team's own work on one cell in the last collect round: GPUs running and GPUs pending."""

    team: str
    orchestrator: str
    gpu_model: str
    running: int
    pending: int


# ------------------------------------------------------------------------------------------ output


@dataclass(frozen=True, slots=True)
class SplitShare:
    """A team's guarantee and cap on one (orchestrator, GPU model), with what it was computed from.

    ``running``/``pending``: the team's own demand there as the split read it (after hysteresis), kept so
    the next round can apply the band; ``subtree_running``/``subtree_pending``: the same with its sub-teams'.
    ``over``: GPUs of ``cap`` beyond what its entitlement gives, held only because that many run there.
    ``cap`` None: no queue of the team covers this model (its parent's applies). ``enforced`` False: Ray,
    observed only. ``reasons`` (derived, so the split stays cheap) say all of it in words for the pages.
    """

    team: str
    orchestrator: str
    gpu_model: str
    guarantee: int
    cap: int | None
    running: int = 0
    pending: int = 0
    over: int = 0
    enforced: bool = True
    fleet_guarantee: int = 0
    fleet_cap: int | None = None
    subtree_running: int = 0
    subtree_pending: int = 0

    @property
    def key(self) -> Key:
        return (self.team, self.orchestrator, self.gpu_model)

    @property
    def reasons(self) -> tuple[str, ...]:
        here = f"{self.subtree_running} running + {self.subtree_pending} pending here (sub-teams included)"
        reasons = [f"guarantee {self.guarantee} of fleet guarantee {self.fleet_guarantee}; {here}"]
        if self.cap is None:
            reasons.append("no queue for this GPU model: no cap of its own (the parent's applies)")
        elif self.over:
            reasons.append(
                f"cap held at {self.cap} by the GPUs running here: {self.over} above its share of fleet cap "
                f"{self.fleet_cap}; reclaim takes them back in order, the cap never does"
            )
        else:
            reasons.append(f"cap {self.cap} of fleet cap {self.fleet_cap}")
        if not self.enforced:
            reasons.append(RAY_OBSERVED)
        return tuple(reasons)


@dataclass(frozen=True, slots=True)
class FleetFigures:
    """A team's fleet-wide entitlement: guarantee and cap (None: no queue, no cap of its own), grants included."""

    team: str
    guarantee: int
    cap: int | None
    granted: int


@dataclass(frozen=True, slots=True)
class Split:
    """Every team's share on every cell, and its fleet figures; ``share`` looks one up."""

    shares: tuple[SplitShare, ...]
    fleet: Mapping[str, FleetFigures] = field(default_factory=dict)
    _index: dict[Key, SplitShare] = field(default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self._index.update(((s.team, s.orchestrator, s.gpu_model), s) for s in self.shares)

    def share(self, team: str, orchestrator: str, gpu_model: str) -> SplitShare | None:
        return self._index.get((team, orchestrator, gpu_model))

    def of_team(self, team: str) -> tuple[SplitShare, ...]:
        return tuple(s for s in self.shares if s.team == team)


# ------------------------------------------------------------------------------------------- pots


@dataclass(slots=True)
class _Pot:
    """One entitlement amount over the cells it may be placed on (indices into the fleet's cells)."""

    guarantee: int
    cap: int
    cells: list[int]
    capped: bool  # a queue's pot caps; a grant to a team with no queue for the cells only guarantees
    queue: bool  # a queue's pot (not a grant's)


def _covered(models: frozenset[str], cells: Sequence[Cell]) -> dict[str, list[int]]:
    """Queue model -> the cells it covers (a model's own queue wins over the any-model queue)."""
    covered: dict[str, list[int]] = {}
    for i, (_, model) in enumerate(cells):
        chosen = model if model in models else ("" if "" in models else None)
        if chosen is not None:
            covered.setdefault(chosen, []).append(i)
    return covered


class _Cells:
    """The fleet's cells and, computed once per split (500 teams share a handful of queue-model sets and
    grant scopes), the cells each queue model and each grant scope covers."""

    def __init__(self, cells: Sequence[Cell]) -> None:
        self.cells = cells
        self._covered: dict[frozenset[str], tuple[dict[str, list[int]], frozenset[int]]] = {}
        self._scope: dict[tuple[str, str], list[int]] = {}

    def covered(self, queues: Sequence[GovQueue]) -> tuple[dict[str, list[int]], frozenset[int]]:
        """Queue model -> cells it covers, and all the cells so covered (capped)."""
        models = frozenset(q.gpu_model for q in queues)
        found = self._covered.get(models)
        if found is None:
            covered = _covered(models, self.cells)
            found = self._covered[models] = (covered, frozenset(i for idx in covered.values() for i in idx))
        return found

    def scope(self, grant: GovGrant) -> list[int]:
        """The cells a grant may be placed on: its orchestrator's (or all) of its model (or any)."""
        key = (grant.orchestrator, grant.gpu_model)
        where = self._scope.get(key)
        if where is None:
            where = self._scope[key] = [
                i
                for i, (orch, model) in enumerate(self.cells)
                if grant.orchestrator in ("", orch) and grant.gpu_model in ("", model)
            ]
        return where


def _pots(
    queues: Sequence[GovQueue],
    guaranteed: Sequence[int],
    grants: Sequence[GovGrant],
    cells: _Cells,
    covered: tuple[dict[str, list[int]], frozenset[int]],
) -> list[_Pot]:
    """The team's pots (its queues with ``guaranteed`` as their guarantees, then its grants), the most
    constrained first (so they take the demand only they may serve). ``covered``: ``cells.covered(queues)``."""
    by_model, capped_cells = covered
    pots = [
        _Pot(g, q.burst_limit, by_model.get(q.gpu_model, []), True, True)
        for q, g in zip(queues, guaranteed, strict=True)
    ]
    for g in grants:
        where = cells.scope(g)
        capped = [i for i in where if i in capped_cells]
        pots.append(_Pot(g.gpus, g.gpus, capped or where, bool(capped), False))
    pots.sort(key=lambda p: len(p.cells))
    return pots


# ------------------------------------------------------------------------------------ arithmetic


def _share_out(amount: int, room: Sequence[int]) -> list[int]:
    """``amount`` (clipped to the total room) in proportion to ``room``, integers by largest remainder;
    nobody gets more than its room."""
    total = sum(room)
    if amount >= total:
        return list(room)
    if amount <= 0:
        return [0] * len(room)
    exact = [amount * r / total for r in room]
    given = [int(x) for x in exact]
    left = amount - sum(given)
    if left:
        short = [g - x for g, x in zip(given, exact, strict=True)]
        for i in sorted(range(len(room)), key=short.__getitem__)[:left]:
            given[i] += 1
    return given


def _place(
    amount: int,
    cells: Sequence[int],
    targets: Iterable[Sequence[int]],
    base: Sequence[int],
    room: list[int],
    *,
    rest: bool = True,
) -> list[int]:
    """Place ``amount`` on ``cells``: up to each target in turn (a total per cell, of which ``base`` is
    there already), in full or in proportion; then (``rest``) what is left in proportion to ``room``.
    ``room`` is consumed. Returns the amount per cell of ``cells``."""
    placed = [0] * len(cells)
    for target in targets:
        if amount <= 0:
            break
        asked = _asked(cells, target, base, placed, room)
        if asked is not None:
            amount -= _take(amount, cells, asked, placed, room)
    if rest and amount > 0:
        _take(amount, cells, [room[c] for c in cells], placed, room)
    return placed


def divide_among(total: int, running: Sequence[int], pending: Sequence[int]) -> list[int]:
    """``total`` divided among parts (a team's namespaces on one cluster): what runs in each first, then what
    is pending, then the rest evenly; the parts sum to ``total``."""
    n = len(running)
    cells = range(n)
    placed = _place(total, cells, [running, _plus(running, pending)], [0] * n, [total] * n, rest=False)
    left = total - sum(placed)
    for k, extra in enumerate(_share_out(left, [left] * n)):  # evenly: equal room, each as large as the rest
        placed[k] += extra
    return placed


def _asked(
    cells: Sequence[int], target: Sequence[int], base: Sequence[int], placed: Sequence[int], room: Sequence[int]
) -> list[int] | None:
    """Per cell of ``cells``: what it still lacks of ``target`` (less ``base`` and what was ``placed``),
    within ``room``; None when no cell lacks anything. (Plain comparisons, not min/max: the split calls this
    tens of thousands of times a round.)"""
    asked = [0] * len(cells)
    wanted = False
    for k, c in enumerate(cells):
        lack = target[c] - base[c] - placed[k]
        if lack > 0:
            if lack > room[c]:
                lack = room[c]
            if lack > 0:
                asked[k] = lack
                wanted = True
    return asked if wanted else None


def _take(
    amount: int,
    cells: Sequence[int],
    asked: Sequence[int],
    placed: list[int],
    room: list[int],
    *,
    by_cell: bool = False,
) -> int:
    """``amount`` given out as ``asked`` (in proportion when it cannot cover all), added to ``placed`` (per
    position in ``cells``, or per cell with ``by_cell``) and taken from ``room``; returns what was given."""
    total = sum(asked)
    given = asked if amount >= total else _share_out(amount, asked)  # everything asked fits: no division
    for k, c in enumerate(cells):
        if given[k]:
            placed[c if by_cell else k] += given[k]
            room[c] -= given[k]
    return total if given is asked else sum(given)


# ------------------------------------------------------------------------------------------- split


@dataclass(slots=True)
class _TeamCells:
    """Working figures of one team per cell (lists indexed like the fleet's cells), its subtree included."""

    slug: str
    ancestors: tuple[str, ...]
    running: list[int]  # effective (after hysteresis): what the split aims at
    pending: list[int]
    actual_running: list[int]  # what no cap may drop below: running as collected (or as the band holds it)
    pots: list[_Pot]  # cap pots: its queues and the grants of its subtree
    own: list[_Pot]  # guarantee pots of its own: queues less what its children are guaranteed, its own grants
    guarantee: list[int]
    cap: list[int]
    capped: list[bool]
    over: list[int]


def split_entitlements(
    data: GovernanceInput,
    at: float,
    supply: Sequence[Supply],
    demand: Sequence[Demand],
    previous: Split | None = None,
) -> Split:
    """Each team's fleet guarantee and cap split into a share per (orchestrator, GPU model); see the module
    docstring for the rules. ``previous`` is the last round's split (for hysteresis)."""
    cells = [(s.orchestrator, s.gpu_model) for s in supply]
    own_run, own_pend, actual_own = _effective_demand(demand, {c: i for i, c in enumerate(cells)}, previous)
    children: dict[str | None, list[GovTeam]] = {}
    for team in data.teams:
        children.setdefault(team.parent, []).append(team)
    queues: dict[str, list[GovQueue]] = {}
    for q in data.queues:
        queues.setdefault(q.team, []).append(q)
    grants = _subtree_grants(data, at)
    cell_sets = _Cells(cells)
    n = len(cells)
    work: dict[str, _TeamCells] = {}
    order: list[_TeamCells] = []  # children before their parent

    def build(team: GovTeam, ancestors: tuple[str, ...]) -> _TeamCells:
        kids = [build(k, (team.slug, *ancestors)) for k in children.get(team.slug, [])]
        run, pend, act = (list(x.get(team.slug, [0] * n)) for x in (own_run, own_pend, actual_own))
        for kid in kids:
            for i in range(n):
                run[i] += kid.running[i]
                pend[i] += kid.pending[i]
                act[i] += kid.actual_running[i]
        mine = queues.get(team.slug, [])
        subtree_grants = grants.get(team.slug, [])
        covered = cell_sets.covered(mine)
        pots = _pots(mine, [q.guaranteed for q in mine], subtree_grants, cell_sets, covered)
        kids_guaranteed = sum(q.guaranteed for k in children.get(team.slug, []) for q in queues.get(k.slug, []))
        own_grants = [g for g in subtree_grants if g.team == team.slug]
        own = _pots(mine, _less(mine, kids_guaranteed), own_grants, cell_sets, covered)
        capped = [False] * n
        for pot in pots:
            if pot.capped:
                for c in pot.cells:
                    capped[c] = True
        w = _TeamCells(team.slug, ancestors, run, pend, act, pots, own, [0] * n, [0] * n, capped, [0] * n)
        work[team.slug] = w
        order.append(w)
        return w

    for root in children.get(None, []):
        build(root, ())
    room = [s.gpus for s in supply]
    for phase in ("running", "pending", "rest"):  # 1. guarantees, all teams together so they fit
        for w in order:
            _place_guarantees(w, phase, room, work)
    # 2. caps, top down: a root's are bounded by its pots only (a cap above a pool's size is harmless, and a
    # pool whose nodes are not known yet must not cap anyone at 0); headroom spreads by pool size
    supply_gpus = [s.gpus for s in supply]
    _caps_of_group(children.get(None, []), [UNBOUNDED] * n, supply_gpus, [True] * n, children, work)
    return _result(data, supply, cells, work, own_run, own_pend, grants)


def _less(queues: Sequence[GovQueue], guaranteed: int) -> list[int]:
    """The queues' guarantees with ``guaranteed`` GPUs taken off them (what the children hold of them)."""
    result = []
    for q in queues:
        taken = min(q.guaranteed, guaranteed)
        guaranteed -= taken
        result.append(q.guaranteed - taken)
    return result


def _effective_demand(
    demand: Sequence[Demand], cell_index: Mapping[Cell, int], previous: Split | None
) -> tuple[dict[str, list[int]], dict[str, list[int]], dict[str, list[int]]]:
    """Per team and cell: running and pending after the hysteresis band, and the floor of its caps (the
    larger of running as collected and as the band reads it)."""
    n = len(cell_index)
    run: dict[str, list[int]] = {}
    pend: dict[str, list[int]] = {}
    actual: dict[str, list[int]] = {}
    for d in demand:
        i = cell_index.get((d.orchestrator, d.gpu_model))
        if i is None:
            continue  # demand on a cell the fleet no longer has: nothing to split there
        before = previous.share(d.team, d.orchestrator, d.gpu_model) if previous is not None else None
        running = _banded(d.running, before.running if before else None)
        run.setdefault(d.team, [0] * n)[i] += running
        # the floor: what runs, or what the band still reads as running (so a cap does not shrink within it)
        actual.setdefault(d.team, [0] * n)[i] += max(d.running, running)
        pend.setdefault(d.team, [0] * n)[i] += _banded(d.pending, before.pending if before else None)
    return run, pend, actual


def _banded(now: int, before: int | None) -> int:
    """The hysteresis rule: within 10 % (rounded down) of the previous value, the previous value."""
    if before is None:
        return now
    return before if abs(now - before) <= int(before * HYSTERESIS_FRACTION) else now


def _subtree_grants(data: GovernanceInput, at: float) -> dict[str, list[GovGrant]]:
    """Grants in force, each listed for its team and every ancestor (a parent's pots hold its subtree's)."""
    parent = {t.slug: t.parent for t in data.teams}
    result: dict[str, list[GovGrant]] = {}
    for g in data.grants:
        if not g.active_at(at) or g.team not in parent:
            continue
        node: str | None = g.team
        while node is not None:
            result.setdefault(node, []).append(g)
            node = parent[node]
    return result


def _place_guarantees(w: _TeamCells, phase: str, room: list[int], work: Mapping[str, _TeamCells]) -> None:
    """One phase of the team's own guarantee pots: its subtree's running GPUs not yet guaranteed (by its
    children or itself), then its pending ones, then the rest: first where its ancestors run unguaranteed,
    then where supply is left. A guarantee placed counts for every ancestor too, so a parent's holds its
    children's."""
    pots = [pot for pot in w.own if pot.guarantee > 0]
    if not pots:
        return  # nothing (left) to place: most teams after the first phases
    target = w.running if phase == "running" else _plus(w.running, w.pending) if phase == "pending" else None
    for pot in pots:
        if target is not None:
            placed = _place(pot.guarantee, pot.cells, [target], w.guarantee, room, rest=False)
        else:  # the rest: where its ancestors run unguaranteed (so their caps need not cover both), then room
            wants = [_minus(work[a].running, work[a].guarantee) for a in w.ancestors]
            placed = _place(pot.guarantee, pot.cells, wants, [0] * len(room), room)
        pot.guarantee -= sum(placed)  # what is left of this pot for the next phase
        for k, c in enumerate(pot.cells):
            if placed[k]:
                w.guarantee[c] += placed[k]
                for slug in w.ancestors:
                    work[slug].guarantee[c] += placed[k]


def _caps_of_group(
    group: Sequence[GovTeam],
    cap_room: Sequence[int],
    weights: Sequence[int],
    parent_capped: Sequence[bool],
    children: Mapping[str | None, list[GovTeam]],
    work: Mapping[str, _TeamCells],
) -> None:
    """Caps of one sibling group within what its parent may use per cell (``cap_room``), the headroom spread
    by ``weights``; then each member's children."""
    for team in group:
        w = work[team.slug]
        limit = [max(r, w.actual_running[i]) if parent_capped[i] else r for i, r in enumerate(cap_room)]
        _place_caps(w, limit, weights)
        kids = children.get(team.slug, [])
        if kids:
            room = [cap if capped else limit[i] for i, (cap, capped) in enumerate(zip(w.cap, w.capped, strict=True))]
            kid_weights = [r if r < UNBOUNDED else weights[i] for i, r in enumerate(room)]
            _caps_of_group(kids, room, kid_weights, w.capped, children, work)


def _place_caps(w: _TeamCells, limit: Sequence[int], weights: Sequence[int]) -> None:
    """Phases outside, pots inside (narrow pots first): the team's guarantee, then its running GPUs, then
    its pending ones, then the rest by ``weights`` within ``limit``; a cell still below what runs there is
    raised to it (over)."""
    room = list(limit)
    pots = [pot for pot in w.pots if pot.capped]
    left = [pot.cap for pot in pots]
    need_run = [max(g, r) for g, r in zip(w.guarantee, w.running, strict=True)]
    nothing = [0] * len(room)  # placed so far, per position of a pot's cells: what the pot takes goes on w.cap
    for target in (w.guarantee, need_run, _plus(w.running, w.pending)):
        for p, pot in enumerate(pots):
            if left[p] > 0:
                asked = _asked(pot.cells, target, w.cap, nothing, room)
                if asked is not None:  # what the pot takes lands on the cap directly (and leaves the room)
                    left[p] -= _take(left[p], pot.cells, asked, w.cap, room, by_cell=True)
    for p, pot in enumerate(pots):
        if left[p] > 0:
            placed = _spread(left[p], pot.cells, weights, room)
            for k, c in enumerate(pot.cells):
                w.cap[c] += placed[k]
    for i, capped in enumerate(w.capped):
        floor = w.actual_running[i]
        if w.guarantee[i] > floor:
            floor = w.guarantee[i]
        if capped and w.cap[i] < floor:
            w.over[i] = floor - w.cap[i]
            w.cap[i] = floor


def _spread(amount: int, cells: Sequence[int], weights: Sequence[int], room: list[int]) -> list[int]:
    """``amount`` over ``cells`` in proportion to ``weights`` (evenly where none has weight), never beyond
    ``room`` (consumed): what a full cell cannot take goes to the others."""
    placed = [0] * len(cells)
    while amount > 0:
        open_ = [k for k, c in enumerate(cells) if room[c] > 0]
        if not open_:
            break
        w = [weights[cells[k]] for k in open_]
        if not any(w):
            w = [1] * len(open_)
        total = sum(w)
        ask = [min(room[cells[k]], -(-amount * wk // total)) for k, wk in zip(open_, w, strict=True)]
        given = _share_out(amount, ask)
        for k, g in zip(open_, given, strict=True):
            placed[k] += g
            room[cells[k]] -= g
        amount -= sum(given)
    return placed


def _minus(a: Sequence[int], b: Sequence[int]) -> list[int]:
    return [max(0, x - y) for x, y in zip(a, b, strict=True)]


def _plus(a: Sequence[int], b: Sequence[int]) -> list[int]:
    return [x + y for x, y in zip(a, b, strict=True)]


# ------------------------------------------------------------------------------------------ result


def _result(
    data: GovernanceInput,
    supply: Sequence[Supply],
    cells: Sequence[Cell],
    work: Mapping[str, _TeamCells],
    own_run: Mapping[str, list[int]],
    own_pend: Mapping[str, list[int]],
    grants: Mapping[str, list[GovGrant]],
) -> Split:
    shares: list[SplitShare] = []
    fleet: dict[str, FleetFigures] = {}
    zero = [0] * len(cells)
    enforced = [s.kind is not OrchestratorKind.RAY for s in supply]
    for team in data.teams:
        w = work.get(team.slug)
        if w is None:
            continue  # a team whose parent is missing from the tree: validation reports it
        figures = _fleet(team.slug, w.pots, grants.get(team.slug, []))
        fleet[team.slug] = figures
        run, pend = own_run.get(team.slug, zero), own_pend.get(team.slug, zero)
        for i, (orch, model) in enumerate(cells):
            shares.append(
                SplitShare(
                    team.slug,
                    orch,
                    model,
                    w.guarantee[i],
                    w.cap[i] if w.capped[i] else None,
                    run[i],
                    pend[i],
                    w.over[i],
                    enforced[i],
                    figures.guarantee,
                    figures.cap,
                    w.actual_running[i],
                    w.pending[i],
                )
            )
    return Split(tuple(shares), fleet)


def _fleet(slug: str, pots: Sequence[_Pot], grants: Sequence[GovGrant]) -> FleetFigures:
    granted = sum(g.gpus for g in grants)
    capped = any(p.capped and p.queue for p in pots)
    cap = sum(p.cap for p in pots if p.capped) if capped else None
    return FleetFigures(slug, sum(p.guarantee for p in pots), cap, granted)
