"""explain_wait: the orchestrator's raw reason read against the snapshot, as what to do."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from scheduling.engine.backfill import easy_backfill
from scheduling.engine.explain import CODES, explain_wait
from scheduling.engine.placement import ClusterState
from scheduling.engine.startplan import PoolSnapshot, estimate_start, estimate_starts
from scheduling.engine.types import MemberAssignment, Request, RunningWorkload, TopologyLevel

from .fleets import dgx, filling_work

NOW = 1_000.0


def test_a_team_at_its_cap_is_told_to_request_quota_with_the_limit() -> None:
    pool = PoolSnapshot("slurm", (dgx("n0"),), team_in_use={"vision": 64}, team_cap={"vision": 64})
    job = Request("j1", gpus_per_member=8, team="vision")
    explanation = explain_wait(job, pool, now=NOW, raw_reason="AssocGrpGRES", cap_label="burst")
    assert explanation.code == "quota_cap"
    assert explanation.asks_for_quota
    assert "your team is at its GPU limit of 64 (burst)" in explanation.message
    assert "request quota" in explanation.message
    assert explanation.numbers["team_cap"] == 64


def test_slurms_quota_reason_alone_is_enough_to_name_the_cap() -> None:
    pool = PoolSnapshot("slurm", (dgx("n0"),))
    explanation = explain_wait(Request("j1", team="vision"), pool, now=NOW, raw_reason="AssocGrpGRES")
    assert explanation.code == "quota_cap"


def test_a_fragmented_pool_names_the_free_gpus_and_the_largest_block() -> None:
    nodes = (dgx("n0", free=4), dgx("n1", free=4), dgx("n2", free=3), dgx("n3", free=3), dgx("n4", free=3))
    pool = PoolSnapshot("slurm", nodes)
    explanation = explain_wait(Request("j1", gpus_per_member=8), pool, now=NOW, raw_reason="Resources")
    assert explanation.code == "fragmented"
    assert explanation.message.startswith(
        "waiting for 8 GPUs on one node: 17 free but fragmented, the largest free block is 4")
    assert explanation.numbers["free_gpus"] == 17
    assert explanation.numbers["largest_free_block"] == 4


def test_a_gang_that_needs_one_leaf_switch_is_told_how_much_is_free_there() -> None:
    leaf0 = tuple(dgx(f"a{i}", free=8 if i < 5 else 0, leaf="leaf-0") for i in range(8))
    leaf1 = tuple(dgx(f"b{i}", free=8 if i < 4 else 0, leaf="leaf-1") for i in range(8))
    pool = PoolSnapshot("kubernetes", leaf0 + leaf1)
    gang = Request("g", members=8, gpus_per_member=8, topology=TopologyLevel.LEAF_SWITCH, topology_required=True)
    explanation = explain_wait(gang, pool, now=NOW, raw_reason="Unschedulable")
    assert explanation.code == "topology"
    assert explanation.message.startswith("gang of 8 × 8 needs 64 GPUs under one leaf switch; 40 free there")


def test_work_that_fits_but_has_work_ahead_waits_for_priority_with_its_position() -> None:
    first = Request("first", gpus_per_member=8, priority=10)
    mine = Request("mine", gpus_per_member=8)
    pool = PoolSnapshot("slurm", (dgx("n0"),), queue=(first, mine))
    explanation = explain_wait(mine, pool, now=NOW, raw_reason="Priority")
    assert explanation.code == "priority"
    assert explanation.numbers["position"] == 2
    assert "#2 in the slurm queue" in explanation.message


def test_a_full_pool_gives_the_backfill_reservation_as_the_estimated_start() -> None:
    busy = RunningWorkload("old", "t", 8.0, (MemberAssignment(0, "n0", tuple(range(8))),),
                           expected_end=NOW + 7_200)
    pool = PoolSnapshot("slurm", (dgx("n0", free=0),), queue=(Request("mine", gpus_per_member=8),),
                        running=(busy,))
    explanation = explain_wait(pool.queue[0], pool, now=NOW, raw_reason="Resources")
    assert explanation.code == "capacity"
    assert explanation.estimate is not None
    assert explanation.estimate.start_at == NOW + 7_200
    assert "estimated start in ~2.0 h" in explanation.message


def test_an_unknown_end_makes_the_start_unpredictable_and_says_so() -> None:
    busy = RunningWorkload("old", "t", 8.0, (MemberAssignment(0, "n0", tuple(range(8))),))
    pool = PoolSnapshot("ray", (dgx("n0", free=0),), running=(busy,))
    explanation = explain_wait(Request("mine", gpus_per_member=8), pool, now=NOW,
                               raw_reason="PENDING_NODE_ASSIGNMENT")
    assert explanation.estimate is not None and explanation.estimate.start_at is None
    assert "not predictable" in explanation.message


def test_a_job_larger_than_the_pool_is_told_to_split() -> None:
    pool = PoolSnapshot("slurm", (dgx("n0"),))
    explanation = explain_wait(Request("big", members=4, gpus_per_member=8), pool, now=NOW)
    assert explanation.code == "too_large"


def test_held_and_dependency_reasons_are_named() -> None:
    pool = PoolSnapshot("slurm", (dgx("n0"),))
    assert explain_wait(Request("j"), pool, now=NOW, raw_reason="JobHeldUser").code == "held"
    assert explain_wait(Request("j"), pool, now=NOW, raw_reason="Dependency").code == "dependency"


def test_a_missing_gpu_model_is_named() -> None:
    pool = PoolSnapshot("slurm", (dgx("n0"),))
    job = Request("j", gpu_models=frozenset({"B200"}))
    assert explain_wait(job, pool, now=NOW).code == "gpu_model"


@settings(max_examples=60, deadline=None)
@given(
    free=st.lists(st.integers(0, 8), min_size=1, max_size=6),
    members=st.integers(1, 4), per_member=st.sampled_from([1, 2, 4, 8]),
    in_use=st.integers(0, 40), cap=st.one_of(st.none(), st.integers(0, 40)),
    raw=st.sampled_from(["", "Resources", "Priority", "AssocGrpGRES", "Unschedulable"]),
)
def test_every_wait_gets_a_known_code_a_sentence_and_a_position(
    free: list[int], members: int, per_member: int, in_use: int, cap: int | None, raw: str,
) -> None:
    nodes = tuple(dgx(f"n{i}", free=f) for i, f in enumerate(free))
    caps = {} if cap is None else {"t": float(cap)}
    pool = PoolSnapshot("slurm", nodes, team_in_use={"t": float(in_use)}, team_cap=caps)
    job = Request("j", members=members, gpus_per_member=per_member, team="t")
    explanation = explain_wait(job, pool, now=NOW, raw_reason=raw)
    assert explanation.code in CODES
    assert explanation.message
    assert explanation.numbers["position"] == 1
    over_cap = cap is not None and in_use + job.gpus > cap
    assert (explanation.code == "quota_cap") == (over_cap or raw == "AssocGrpGRES")


@settings(max_examples=150, deadline=None)
@given(
    data=st.data(),
    free=st.lists(st.integers(0, 8), min_size=1, max_size=5),
    sizes=st.lists(st.tuples(st.sampled_from([1, 2, 4, 8]), st.integers(1, 2), st.sampled_from([0, 600, 7200])),
                   min_size=1, max_size=12),
    ends=st.lists(st.sampled_from([None, 300.0, 3_600.0]), max_size=5),
)
def test_one_backfill_pass_estimates_every_queued_job_as_its_own_pass_would(data, free, sizes, ends) -> None:
    nodes = tuple(dgx(f"n{i}", free=f) for i, f in enumerate(free))
    running = filling_work(free, ends, NOW)
    queue = tuple(Request(f"q{i}", members=m, gpus_per_member=g, duration_estimate_s=d, team="t")
                  for i, (g, m, d) in enumerate(sizes))
    pool = PoolSnapshot("slurm", nodes, queue=queue, running=running, team_in_use={"t": 8.0},
                        team_cap=data.draw(st.sampled_from([{}, {"t": 24.0}])))
    asked = data.draw(st.lists(st.sampled_from(queue), unique_by=lambda r: r.id, min_size=1))
    outsider = Request("new", gpus_per_member=2)
    together = estimate_starts([*asked, outsider], pool, NOW)
    assert together == {r.id: estimate_start(r, pool, NOW) for r in [*asked, outsider]}


def naive_drain(free_now: float, capacity: int, jobs: list[Request], running, now: float) -> float | None:
    """Step 3 done the plain way, for one job: everything ahead of it, then it, each waiting for known ends."""
    ends = sorted((w.expected_end, w.gpus) for w in running if w.expected_end is not None)
    free, at = free_now, now
    for job in jobs:
        if job.gpus > capacity:
            continue
        while free < job.gpus:
            if not ends:
                return None
            end, gpus = ends.pop(0)
            free, at = free + gpus, max(at, end)
        free -= job.gpus
        if job.duration_estimate_s > 0:
            ends = sorted([*ends, (at + job.duration_estimate_s, job.gpus)])
    return at


@settings(max_examples=150, deadline=None)
@given(
    free=st.lists(st.integers(0, 8), min_size=1, max_size=4),
    sizes=st.lists(st.tuples(st.sampled_from([1, 2, 4, 8, 16, 64]), st.sampled_from([0, 600, 7200])),
                   min_size=1, max_size=12),
    ends=st.lists(st.sampled_from([None, 300.0, 3_600.0]), max_size=4),
)
def test_a_drained_start_is_when_the_plain_in_order_drain_starts_it(free, sizes, ends) -> None:
    """The one-pass drain plan of a whole queue answers each entry as a drain of just its prefix would."""
    nodes = tuple(dgx(f"n{i}", free=f) for i, f in enumerate(free))
    running = filling_work(free, ends, NOW)
    queue = tuple(
        Request(f"q{i}", gpus_per_member=g, duration_estimate_s=d, team="t") for i, (g, d) in enumerate(sizes)
    )
    pool = PoolSnapshot("slurm", nodes, queue=queue, running=running)
    plan = estimate_starts(queue, pool, NOW)
    for index, request in enumerate(queue):
        estimate = plan[request.id]
        if estimate.basis not in ("drain", "unknown") or estimate.position == 1:
            continue
        state = ClusterState(nodes)
        decision = easy_backfill(state, queue[:index + 1], running, NOW)
        drained = naive_drain(state.gpu_free, 8 * len(nodes), list(queue[:index + 1]), running, NOW)
        if drained is None:
            assert estimate.start_at is None
        elif decision.head_id != request.id and request.id not in decision.started_ids:
            assert estimate.start_at == max(drained, decision.head_reservation_at or NOW)
