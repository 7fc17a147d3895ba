"""The gpu-priority-expander's choice: the pool whose queue is most short, never past a ceiling."""

from hypothesis import given
from hypothesis import strategies as st

from scheduling.engine.calendar import Bounds
from scheduling.engine.expander import GrowthOption, PodAsk, choose_growth
from scheduling.engine.rebalance import PoolTarget


def target(pool, owns, desired, ceiling=None):
    return PoolTarget(pool, owns, 0, ceiling, desired, owns, "test")


EIGHT_GPU_GANG = (PodAsk(8.0),)


def test_grows_the_pool_whose_queue_is_most_short():
    options = [
        GrowthOption("slurm-a100", 1, 8, "slurm", "A100", EIGHT_GPU_GANG),
        GrowthOption("volcano-a100", 1, 8, "volcano", "A100", EIGHT_GPU_GANG),
    ]
    targets = [target("slurm", 64, 70.0), target("volcano", 32, 90.0)]
    verdict = choose_growth(options, targets, {})
    assert verdict.chosen == ("volcano-a100",)
    assert "queue 58 weighted GPUs short" in verdict.ranked[0].reason
    assert verdict.summary.startswith("grow volcano-a100")


def test_never_past_a_ceiling_names_the_rule():
    options = [
        GrowthOption("volcano-a100", 2, 8, "volcano", pods=(PodAsk(16.0),)),
        GrowthOption("ray-a100", 2, 8, "ray", pods=(PodAsk(16.0),)),
    ]
    targets = [target("volcano", 40, 200.0, ceiling=48), target("ray", 16, 20.0)]
    bounds = {"volcano": Bounds("volcano", 0, 48, True, "daytime-cap")}
    verdict = choose_growth(options, targets, bounds)
    assert verdict.chosen == ("ray-a100",)
    refused = next(r for r in verdict.ranked if r.node_group == "volcano-a100")
    assert not refused.eligible
    assert "from 40 to 56, above its ceiling of 48 (rule 'daytime-cap')" in refused.reason


def test_every_option_past_its_ceiling_leaves_the_autoscaler_its_options():
    options = [GrowthOption("volcano-a100", 1, 8, "volcano", pods=EIGHT_GPU_GANG)]
    verdict = choose_growth(options, [target("volcano", 48, 90.0, ceiling=48)], {})
    assert verdict.chosen == ()
    assert "maxSize" in verdict.summary


def test_least_waste_breaks_a_tie_between_shapes_of_one_pool():
    options = [
        GrowthOption("volcano-8x", 1, 8, "volcano", pods=(PodAsk(4.0),)),
        GrowthOption("volcano-4x", 1, 4, "volcano", pods=(PodAsk(4.0),)),
    ]
    verdict = choose_growth(options, [target("volcano", 8, 30.0)], {})
    assert verdict.chosen == ("volcano-4x",)


def test_a_template_without_gpus_is_never_chosen_for_gpu_pods():
    options = [
        GrowthOption("cpu-pool", 3, 0, "volcano", pods=EIGHT_GPU_GANG),
        GrowthOption("gpu-pool", 1, 8, "volcano", pods=EIGHT_GPU_GANG),
    ]
    verdict = choose_growth(options, [target("volcano", 8, 30.0)], {})
    assert verdict.chosen == ("gpu-pool",)
    assert "no GPU" in next(r.reason for r in verdict.ranked if r.node_group == "cpu-pool")


def test_a_scale_up_without_gpus_is_left_to_the_fallback_expander():
    options = [GrowthOption("cpu-a", 1, 0, "volcano", pods=(PodAsk(0.0),)),
               GrowthOption("cpu-b", 2, 0, "volcano", pods=(PodAsk(0.0),))]
    verdict = choose_growth(options, [target("volcano", 8, 30.0)], {})
    assert verdict.chosen == ("cpu-a", "cpu-b")


def test_higher_priority_pods_win_between_pools_equally_short():
    options = [
        GrowthOption("slurm-a", 1, 8, "slurm", pods=(PodAsk(8.0, priority=0),)),
        GrowthOption("ray-a", 1, 8, "ray", pods=(PodAsk(8.0, priority=200),)),
    ]
    verdict = choose_growth(options, [target("slurm", 8, 20.0), target("ray", 8, 20.0)], {})
    assert verdict.chosen == ("ray-a",)


# ---------------------------------------------------------------------------------------- properties

POOLS = ("slurm", "volcano", "ray")

options_strategy = st.lists(
    st.builds(
        GrowthOption,
        node_group=st.sampled_from([f"group-{i}" for i in range(8)]),
        node_count=st.integers(0, 6),
        gpus_per_node=st.sampled_from([0, 4, 8]),
        pool=st.sampled_from(POOLS),
        pods=st.lists(st.builds(PodAsk, st.sampled_from([0.0, 1.0, 4.0, 8.0]), st.integers(-100, 300)),
                      max_size=4).map(tuple),
    ),
    min_size=1, max_size=8, unique_by=lambda o: o.node_group,
)
targets_strategy = st.fixed_dictionaries({
    pool: st.tuples(st.integers(0, 128), st.floats(0, 400), st.one_of(st.none(), st.integers(0, 160)))
    for pool in POOLS
}).map(lambda d: [target(p, owns, desired, ceiling) for p, (owns, desired, ceiling) in d.items()])


def _breaks_ceiling(option, targets):
    t = next(t for t in targets if t.orchestrator == option.pool)
    return t.ceiling_gpus is not None and t.current_gpus + option.gpus_added > t.ceiling_gpus


@given(options_strategy, targets_strategy)
def test_chosen_options_were_offered(options, targets):
    verdict = choose_growth(options, targets, {})
    assert set(verdict.chosen) <= {o.node_group for o in options}
    assert len(verdict.ranked) == len(options)


@given(options_strategy, targets_strategy)
def test_a_gpu_scale_up_never_grows_past_a_ceiling_or_without_gpus(options, targets):
    verdict = choose_growth(options, targets, {})
    if any(o.gpus_asked > 0 for o in options):
        assert len(verdict.chosen) <= 1
        for group in verdict.chosen:
            option = next(o for o in options if o.node_group == group)
            assert option.gpus_added > 0 and not _breaks_ceiling(option, targets)
        possible = [o for o in options if o.gpus_added > 0 and not _breaks_ceiling(o, targets)]
        assert bool(verdict.chosen) == bool(possible)


@given(options_strategy, targets_strategy)
def test_the_chosen_pool_is_the_most_short_of_those_possible(options, targets):
    verdict = choose_growth(options, targets, {})
    if any(o.gpus_asked > 0 for o in options) and verdict.chosen:
        chosen = next(r for r in verdict.ranked if r.node_group == verdict.chosen[0])
        assert all(chosen.pressure_gpus >= r.pressure_gpus for r in verdict.ranked if r.eligible)


@given(options_strategy, targets_strategy, st.randoms())
def test_the_choice_does_not_depend_on_the_order_offered(options, targets, random):
    shuffled = list(options)
    random.shuffle(shuffled)
    first, second = choose_growth(options, targets, {}), choose_growth(shuffled, targets, {})
    if any(o.gpus_asked > 0 for o in options):
        assert first.chosen == second.chosen
