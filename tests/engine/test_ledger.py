"""The ledger's rules on hand-built rounds: each round is (sources, now) fed through detect + reconcile,
the findings of one round carried into the next as the service would (no database)."""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import given, settings
from hypothesis import strategies as st

from scheduling.engine.ledger import (
    Alias,
    Finding,
    FindingKind,
    Host,
    LedgerConfig,
    PlanStep,
    Severity,
    Source,
    SourceView,
    detect,
    ownership_changes,
    reconcile,
)

CONFIG = LedgerConfig(orphan_after_s=600, phantom_after_s=120)
HOSTS = (Host("dgx01", 8), Host("dgx02", 8))


def view(orch: str, name: str, schedulable: bool = True, **extra) -> SourceView:
    return SourceView(orch, name, schedulable, extra.pop("gpu_total", 8), **extra)


def slurm(*views: SourceView, fresh: bool = True, has_data: bool = True) -> Source:
    return Source("slurm", "slurm", fresh, views, has_data)


def k8s(*views: SourceView, fresh: bool = True, has_data: bool = True) -> Source:
    return Source("k8s", "kubernetes", fresh, views, has_data)


@dataclass
class Ledger:
    """Carries the findings on record and the open ownership intervals from round to round."""

    hosts: tuple[Host, ...] = HOSTS
    aliases: tuple[Alias, ...] = ()
    config: LedgerConfig = CONFIG
    record: dict[str, Finding] = field(default_factory=dict)
    closed: list[Finding] = field(default_factory=list)
    intervals: set[tuple[str, str]] = field(default_factory=set)

    def round(self, now: float, *sources: Source, steps: tuple[PlanStep, ...] = ()):
        detection = detect(self.hosts, self.aliases, sources, steps, now, self.config)
        result = reconcile(tuple(self.record.values()), detection, now)
        for key in result.closed:
            self.closed.append(self.record.pop(key))
        for key in result.discarded:
            self.record.pop(key)
        self.record.update((f.key, f) for f in result.upserts)
        to_open, to_close = ownership_changes(self.intervals, detection)
        self.intervals = (self.intervals - to_close) | to_open
        return result

    def open(self, kind: FindingKind | None = None) -> list[Finding]:
        return [f for f in self.record.values() if f.opened_at is not None and (kind is None or f.kind is kind)]


def healthy(now_views_k8s: bool = False) -> tuple[Source, Source]:
    return slurm(view("slurm", "dgx01"), view("slurm", "dgx02", False)), k8s(
        view("k8s", "dgx01", now_views_k8s), view("k8s", "dgx02")
    )


def test_a_healthy_split_gives_no_finding_and_one_owner_per_node():
    ledger = Ledger()
    ledger.round(0, *healthy())
    assert ledger.record == {}
    assert ledger.intervals == {("dgx01", "slurm"), ("dgx02", "k8s")}


def test_a_node_schedulable_in_two_orchestrators_opens_a_high_double_ownership_at_once_and_names_both():
    ledger = Ledger()
    result = ledger.round(0, *healthy(now_views_k8s=True))
    (finding,) = ledger.open(FindingKind.DOUBLE_OWNERSHIP)
    assert finding.node == "dgx01" and finding.severity is Severity.HIGH
    assert finding.orchestrators == ("k8s", "slurm")
    assert "k8s" in finding.explanation and "slurm" in finding.explanation
    assert result.newly_open == (finding.key,)
    assert ledger.intervals == {("dgx01", "slurm"), ("dgx01", "k8s"), ("dgx02", "k8s")}


def test_a_double_ownership_closes_the_round_after_one_side_drains_and_keeps_its_history():
    ledger = Ledger()
    ledger.round(0, *healthy(now_views_k8s=True))
    ledger.round(30, *healthy(now_views_k8s=True))
    assert ledger.open(FindingKind.DOUBLE_OWNERSHIP)[0].last_seen == 30
    result = ledger.round(60, slurm(view("slurm", "dgx01", False), view("slurm", "dgx02", False)), healthy(True)[1])
    assert ledger.open() == []
    assert [f.kind for f in ledger.closed] == [FindingKind.DOUBLE_OWNERSHIP]
    assert result.closed == (f"{FindingKind.DOUBLE_OWNERSHIP}:dgx01",)
    assert ("dgx01", "slurm") not in ledger.intervals and ("dgx01", "k8s") in ledger.intervals


def test_the_explanation_names_whom_the_portal_expects_and_whom_to_release():
    ledger = Ledger(hosts=(Host("dgx01", 8, expected_owner="k8s", expected_because="plan #3 applied"), HOSTS[1]))
    ledger.round(0, *healthy(now_views_k8s=True))
    text = ledger.open()[0].explanation
    assert "expects k8s (plan #3 applied)" in text and "release it in slurm" in text


def test_a_node_drained_everywhere_is_an_orphan_only_after_the_setting():
    ledger = Ledger()
    drained = (
        slurm(view("slurm", "dgx01"), view("slurm", "dgx02", False, why_not="drained (maint)")),
        k8s(view("k8s", "dgx01", False), view("k8s", "dgx02", False, why_not="cordoned")),
    )
    ledger.round(0, *drained)
    assert ledger.open() == [] and list(ledger.record) == [f"{FindingKind.ORPHAN}:dgx02"]  # pending
    ledger.round(599, *drained)
    assert ledger.open() == []
    result = ledger.round(600, *drained)
    (orphan,) = ledger.open(FindingKind.ORPHAN)
    assert orphan.first_seen == 0 and orphan.opened_at == 600 and result.newly_open == (orphan.key,)
    assert "drained (maint)" in orphan.explanation and "cordoned" in orphan.explanation


def test_an_orphan_that_is_taken_back_before_the_setting_leaves_no_history():
    ledger = Ledger()
    orphaned = (slurm(view("slurm", "dgx01"), view("slurm", "dgx02", False)), k8s(view("k8s", "dgx02", False)))
    ledger.round(0, *orphaned)
    result = ledger.round(300, *healthy())
    assert result.discarded == (f"{FindingKind.ORPHAN}:dgx02",) and ledger.record == {} and ledger.closed == []


def test_an_inventory_host_no_orchestrator_lists_is_an_orphan():
    ledger = Ledger(hosts=(*HOSTS, Host("dgx03", 8)))
    ledger.round(0, *healthy())
    ledger.round(601, *healthy())
    (orphan,) = ledger.open(FindingKind.ORPHAN)
    assert orphan.node == "dgx03" and "no orchestrator lists it" in orphan.explanation


def test_a_retired_host_owned_by_nobody_is_not_an_orphan():
    ledger = Ledger(hosts=(*HOSTS, Host("dgx03", 8, retired=True)))
    ledger.round(0, *healthy())
    ledger.round(601, *healthy())
    assert ledger.record == {}


# ------------------------------------------------------------------------------------- flapping sources


def test_a_source_that_goes_stale_creates_no_orphan_however_long_it_stays_stale():
    ledger = Ledger()
    _slurm, kube = healthy()
    ledger.round(0, *healthy())
    stale_slurm = slurm(view("slurm", "dgx01"), view("slurm", "dgx02", False), fresh=False)
    for now in range(30, 5000, 30):
        ledger.round(now, stale_slurm, kube)
    assert ledger.record == {}
    assert ("dgx01", "slurm") in ledger.intervals  # the ledger does not know the interval ended


def test_a_flapping_source_neither_opens_nor_closes_a_double_ownership():
    ledger = Ledger()
    ledger.round(0, *healthy(now_views_k8s=True))
    key = ledger.open()[0].key
    both = healthy(now_views_k8s=True)
    for now in range(30, 900, 30):
        stale = now % 60 == 0
        kube = k8s(*both[1].views, fresh=not stale)
        result = ledger.round(now, both[0], kube)
        assert key in ledger.record and ledger.closed == []
        assert (key in result.held) is stale
    assert ledger.record[key].last_seen == 870  # updated only in the fresh rounds


def test_a_source_that_never_answered_holds_every_orphan():
    ledger = Ledger()
    silent = Source("ray", "ray", False, (), has_data=False)
    drained = (slurm(view("slurm", "dgx01", False), view("slurm", "dgx02", False)), silent)
    ledger.round(0, *drained)
    ledger.round(10_000, *drained)
    assert ledger.record == {}


def test_a_stale_source_keeps_its_own_capacity_finding_open_until_it_answers_again():
    ledger = Ledger()
    short = slurm(view("slurm", "dgx01", gpu_total=7), view("slurm", "dgx02", False))
    ledger.round(0, short, healthy()[1])
    assert len(ledger.open(FindingKind.CAPACITY_MISMATCH)) == 1
    ledger.round(30, slurm(*short.views, fresh=False), healthy()[1])
    assert len(ledger.open(FindingKind.CAPACITY_MISMATCH)) == 1
    ledger.round(60, *healthy())
    assert ledger.open() == [] and [f.kind for f in ledger.closed] == [FindingKind.CAPACITY_MISMATCH]


def test_a_stale_source_that_claims_a_node_makes_no_double_ownership():
    ledger = Ledger()
    ledger.round(0, slurm(view("slurm", "dgx01"), fresh=False), k8s(view("k8s", "dgx01"), view("k8s", "dgx02")))
    assert ledger.record == {}


# ------------------------------------------------------------------------------------- source rules


def test_fewer_gpus_than_the_inventory_is_a_medium_capacity_mismatch_naming_the_missing_uuid():
    ledger = Ledger(hosts=(Host("dgx01", 2, gpu_uuids=frozenset({"GPU-a", "GPU-b"})),))
    ledger.round(0, slurm(view("slurm", "dgx01", gpu_total=1, gpu_uuids=frozenset({"GPU-a"}))))
    (finding,) = ledger.open(FindingKind.CAPACITY_MISMATCH)
    assert finding.severity is Severity.MEDIUM
    assert "GPU-b" in finding.explanation and "reports 1 GPUs" in finding.explanation


def test_more_gpus_than_the_inventory_is_a_low_mismatch_and_a_cordoned_node_reporting_none_is_not_one():
    ledger = Ledger(hosts=(Host("dgx01", 8), Host("dgx02", 8)))
    ledger.round(0, slurm(view("slurm", "dgx01", gpu_total=16)), k8s(view("k8s", "dgx02", False, gpu_total=0)))
    (finding,) = ledger.open(FindingKind.CAPACITY_MISMATCH)
    assert finding.node == "dgx01" and finding.severity is Severity.LOW


def test_allocated_gpus_no_listed_workload_holds_are_a_phantom_after_the_grace():
    ledger = Ledger()
    leaky = slurm(view("slurm", "dgx01", gpu_allocated=8, gpu_backed=4.0), view("slurm", "dgx02", False))
    ledger.round(0, leaky, healthy()[1])
    assert ledger.open() == []
    ledger.round(120, leaky, healthy()[1])
    (phantom,) = ledger.open(FindingKind.PHANTOM_ALLOCATION)
    assert "4 GPUs are held by nothing" in phantom.explanation


def test_a_source_that_does_not_say_where_work_runs_never_shows_a_phantom():
    ledger = Ledger()
    blind = slurm(view("slurm", "dgx01", gpu_allocated=8, gpu_backed=None), view("slurm", "dgx02", False))
    ledger.round(0, blind, healthy()[1])
    ledger.round(1000, blind, healthy()[1])
    assert ledger.open(FindingKind.PHANTOM_ALLOCATION) == []


def test_a_node_missing_from_the_inventory_is_unknown_and_still_caught_twice_owned_by_its_name():
    ledger = Ledger()
    ledger.round(0, slurm(view("slurm", "gpu99"), *healthy()[0].views), k8s(view("k8s", "gpu99"), *healthy()[1].views))
    kinds = sorted((f.kind, f.node) for f in ledger.open())
    assert kinds == [
        (FindingKind.DOUBLE_OWNERSHIP, "gpu99"),
        (FindingKind.UNKNOWN_NODE, "gpu99"),
        (FindingKind.UNKNOWN_NODE, "gpu99"),
    ]


def test_a_node_without_gpus_is_not_unknown():
    ledger = Ledger()
    ledger.round(0, slurm(*healthy()[0].views), k8s(view("k8s", "control-plane", gpu_total=0), *healthy()[1].views))
    assert ledger.record == {}


def test_an_alias_a_short_name_and_a_gpu_uuid_each_join_a_view_to_its_host():
    hosts = (Host("dgx01", 8), Host("dgx02", 8, gpu_uuids=frozenset({"GPU-2"})), Host("dgx03", 8))
    ledger = Ledger(hosts=hosts, aliases=(Alias("ray", "10.0.0.1", "dgx01"),))
    sources = (
        Source("ray", "ray", True, (view("ray", "10.0.0.1"),)),
        slurm(view("slurm", "dgx01", False), view("slurm", "x-node", gpu_uuids=frozenset({"GPU-2"}))),
        k8s(view("k8s", "dgx03.cluster.local")),
    )
    ledger.round(0, *sources)
    assert ledger.record == {}
    assert ledger.intervals == {("dgx01", "ray"), ("dgx02", "slurm"), ("dgx03", "k8s")}


# --------------------------------------------------------------------------------------- plan steps


def step(state: str, since: float) -> PlanStep:
    return PlanStep(7, 3, "dgx01", "slurm", "k8s", state, since, timeout_s=3600)


def test_a_plan_step_waiting_past_its_timeout_is_a_high_stuck_transition_that_clears_when_it_moves_on():
    ledger = Ledger()
    ledger.round(3600, *healthy(), steps=(step("draining", 0),))
    assert ledger.record == {}
    ledger.round(3601, *healthy(), steps=(step("draining", 0),))
    (stuck,) = ledger.open(FindingKind.STUCK_TRANSITION)
    assert stuck.severity is Severity.HIGH and "Plan #3" in stuck.explanation and "still draining" in stuck.explanation
    ledger.round(3700, *healthy())
    assert ledger.open() == [] and [f.kind for f in ledger.closed] == [FindingKind.STUCK_TRANSITION]


def test_a_node_drained_by_a_plan_in_progress_is_not_an_orphan_while_the_step_is_within_its_timeout():
    ledger = Ledger()
    between = (slurm(view("slurm", "dgx01", False), view("slurm", "dgx02", False)), k8s(view("k8s", "dgx02")))
    ledger.round(0, *between, steps=(step("draining", 0),))
    ledger.round(3000, *between, steps=(step("draining", 0),))
    assert ledger.record == {}


# --------------------------------------------------------------------------------------- properties

NODES = [f"n{i}" for i in range(4)]
round_strategy = st.lists(
    st.tuples(
        st.booleans(),  # slurm fresh
        st.booleans(),  # k8s fresh
        st.lists(st.booleans(), min_size=4, max_size=4),  # slurm schedulable per node
        st.lists(st.booleans(), min_size=4, max_size=4),  # k8s schedulable per node
    ),
    min_size=1,
    max_size=12,
)


@settings(max_examples=150, deadline=None)
@given(round_strategy)
def test_findings_follow_the_fresh_truth_and_never_open_on_a_stale_view(rounds):
    """Invariant: after every round, an open double ownership exists for a node if and only if two fresh
    sources claim it or it was open before and a stale source keeps it undecided; nothing is open that no
    fresh source backs; a closed finding never has a live twin."""
    ledger = Ledger(hosts=tuple(Host(n, 8) for n in NODES), config=LedgerConfig(orphan_after_s=1e9))
    for index, (s_fresh, k_fresh, s_sched, k_sched) in enumerate(rounds):
        before = {f.node for f in ledger.open(FindingKind.DOUBLE_OWNERSHIP)}
        sources = (
            slurm(*(view("slurm", n, s) for n, s in zip(NODES, s_sched, strict=True)), fresh=s_fresh),
            k8s(*(view("k8s", n, k) for n, k in zip(NODES, k_sched, strict=True)), fresh=k_fresh),
        )
        ledger.round(index * 30.0, *sources)
        now_open = {f.node for f in ledger.open(FindingKind.DOUBLE_OWNERSHIP)}
        for n, s, k in zip(NODES, s_sched, k_sched, strict=True):
            claimed_fresh = s and k and s_fresh and k_fresh
            # a stale source's claim is unknown: undecided when the fresh side still claims it, or both are stale
            undecided = (not s_fresh and not k_fresh) or (not s_fresh and k) or (not k_fresh and s)
            if claimed_fresh:
                assert n in now_open
            elif n in now_open:
                assert n in before and undecided
        assert ledger.open(FindingKind.ORPHAN) == []
        live_keys = set(ledger.record)
        assert all(f.key not in live_keys or f.opened_at is not None for f in ledger.closed)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.lists(st.booleans(), min_size=4, max_size=4), min_size=1, max_size=10))
def test_ownership_intervals_always_equal_the_fresh_owners(rounds):
    ledger = Ledger(hosts=tuple(Host(n, 8) for n in NODES))
    for index, schedulable in enumerate(rounds):
        ledger.round(index * 30.0, slurm(*(view("slurm", n, s) for n, s in zip(NODES, schedulable, strict=True))))
        assert ledger.intervals == {(n, "slurm") for n, s in zip(NODES, schedulable, strict=True) if s}
