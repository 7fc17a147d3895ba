"""route_by_start: among the pools policy allows, the one where the workload starts first."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from scheduling.engine.routing import route, route_by_start
from scheduling.engine.startplan import PoolSnapshot, describe_wait, estimate_start
from scheduling.engine.types import MemberAssignment, Request, RunningWorkload, WorkloadKind

from .fleets import dgx

NOW = 0.0


def full_pool(name: str, end: float | None, nodes: int = 2) -> PoolSnapshot:
    running = tuple(
        RunningWorkload(f"{name}-r{i}", "other", 8.0, (MemberAssignment(0, f"{name}{i}", tuple(range(8))),),
                        expected_end=end)
        for i in range(nodes)
    )
    return PoolSnapshot(name, tuple(dgx(f"{name}{i}", free=0) for i in range(nodes)), running=running)


def free_pool(name: str, nodes: int = 2) -> PoolSnapshot:
    return PoolSnapshot(name, tuple(dgx(f"{name}{i}") for i in range(nodes)))


def test_a_training_job_goes_where_it_starts_now_rather_than_to_the_busy_rule_choice() -> None:
    job = Request("train", gpus_per_member=8, kind=WorkloadKind.TRAINING, duration_estimate_s=7_200)
    assert route(job, available={"slurm", "kubernetes"}).orchestrator == "slurm"
    decision = route_by_start(job, [full_pool("slurm", end=7_200), free_pool("kubernetes")], now=NOW)
    assert decision.orchestrator == "kubernetes"
    assert decision.rule == "predicted-start"
    assert any(reason.startswith("slurm: starts in ~2.0 h") for reason in decision.reasons)
    assert any(reason.startswith("kubernetes: starts now") for reason in decision.reasons)


def test_a_tie_goes_to_the_rules_preference() -> None:
    job = Request("train", gpus_per_member=8, kind=WorkloadKind.TRAINING)
    decision = route_by_start(job, [free_pool("kubernetes"), free_pool("slurm")], now=NOW)
    assert decision.orchestrator == "slurm"


def test_an_explicit_request_is_honoured_when_allowed() -> None:
    job = Request("j", orchestrator="slurm")
    decision = route_by_start(job, [full_pool("slurm", end=None), free_pool("ray")], now=NOW)
    assert decision.orchestrator == "slurm"
    assert decision.rule == "explicit"


def test_with_no_predictable_start_anywhere_the_rule_decides() -> None:
    job = Request("train", gpus_per_member=8, kind=WorkloadKind.TRAINING)
    decision = route_by_start(job, [full_pool("kubernetes", end=None), full_pool("slurm", end=None)], now=NOW)
    assert decision.orchestrator == "slurm"
    assert "no candidate has a predictable start" in decision.reasons[-1]


def test_a_team_at_its_cap_in_one_pool_is_routed_to_another() -> None:
    job = Request("j", gpus_per_member=8, team="vision", kind=WorkloadKind.TRAINING)
    capped = PoolSnapshot("slurm", (dgx("s0"),), team_in_use={"vision": 8}, team_cap={"vision": 8})
    decision = route_by_start(job, [capped, free_pool("kubernetes")], now=NOW)
    assert decision.orchestrator == "kubernetes"
    assert any("slurm: start unknown" in reason and "[quota]" in reason for reason in decision.reasons)


def test_the_calendar_floor_delays_the_start() -> None:
    pool = PoolSnapshot("slurm", (dgx("s0"),), not_before=3_600.0)
    assert estimate_start(Request("j"), pool, NOW).start_at == 3_600.0


def test_a_workload_behind_the_head_drains_after_the_head_reservation() -> None:
    pool = full_pool("slurm", end=1_000.0, nodes=1)
    head = Request("head", gpus_per_member=8, duration_estimate_s=500, priority=5)
    pool = PoolSnapshot(pool.orchestrator, pool.nodes, queue=(head,), running=pool.running)
    estimate = estimate_start(Request("mine", gpus_per_member=8), pool, NOW)
    assert estimate.position == 2 and estimate.ahead == 1
    assert estimate.start_at is not None and estimate.start_at >= 1_000.0


def test_waits_read_as_a_researcher_would_say_them() -> None:
    assert describe_wait(None) == "unknown"
    assert describe_wait(30) == "now"
    assert describe_wait(40 * 60) == "~40 min"
    assert describe_wait(7_200) == "~2.0 h"
    assert describe_wait(5 * 86_400) == "~5 d"


@settings(max_examples=50, deadline=None)
@given(ends=st.lists(st.one_of(st.none(), st.floats(1, 10_000)), min_size=1, max_size=4),
       gpus=st.sampled_from([1, 2, 4, 8]))
def test_the_chosen_pool_never_has_a_later_predicted_start_than_another_candidate(
    ends: list[float | None], gpus: int,
) -> None:
    pools = [full_pool(f"p{i}", end=end, nodes=1) for i, end in enumerate(ends)]
    job = Request("j", gpus_per_member=gpus)
    decision = route_by_start(job, pools, now=NOW)
    starts = {pool.orchestrator: estimate_start(job, pool, NOW).start_at for pool in pools}
    chosen = starts[decision.orchestrator]
    known = [start for start in starts.values() if start is not None]
    if known:
        assert chosen is not None and chosen // 60 <= min(known) // 60


def test_inference_never_goes_to_a_batch_queue_even_when_it_would_start_sooner() -> None:
    service = Request("svc", gpus_per_member=1, kind=WorkloadKind.INFERENCE)
    decision = route_by_start(service, [free_pool("slurm"), full_pool("kubernetes", end=3_600)], now=NOW)
    assert decision.orchestrator == "kubernetes"
    assert not any(reason.startswith("slurm:") for reason in decision.reasons)


def test_a_home_orchestrator_is_left_only_for_a_real_gain() -> None:
    job = Request("j", gpus_per_member=8, kind=WorkloadKind.TRAINING, duration_estimate_s=600)
    pools = [full_pool("ray", end=1_800), free_pool("slurm")]
    assert route_by_start(job, pools, now=NOW, home="ray", min_gain_s=3_600).orchestrator == "ray"
    assert route_by_start(job, pools, now=NOW, home="ray", min_gain_s=600).orchestrator == "slurm"


def test_long_or_unknown_work_never_leaves_the_rules_choice_under_a_guest_limit() -> None:
    pools = [full_pool("slurm", end=86_400), free_pool("kubernetes")]
    long = Request("long", gpus_per_member=8, kind=WorkloadKind.TRAINING, duration_estimate_s=86_400)
    unknown = Request("unknown", gpus_per_member=8, kind=WorkloadKind.TRAINING)
    short = Request("short", gpus_per_member=8, kind=WorkloadKind.TRAINING, duration_estimate_s=3_600)
    for job in (long, unknown):
        decision = route_by_start(job, pools, now=NOW, guest_max_s=4 * 3_600)
        assert decision.orchestrator == "slurm"
        assert any("may go elsewhere" in reason for reason in decision.reasons)
    assert route_by_start(short, pools, now=NOW, guest_max_s=4 * 3_600).orchestrator == "kubernetes"
