"""The week replay: rebalancing never breaches the inference floor and serves the overnight sweeps."""

import pytest

from scheduling.simulation import rebalance_week


@pytest.fixture(scope="module")
def week():
    static, federated = rebalance_week.run(seed=3)
    return static, federated


def test_the_federated_week_never_lets_inference_fall_below_its_business_hours_floor(week):
    assert week[1].floor_breach_steps == 0


def test_rebalancing_moves_nodes_and_cuts_rays_overnight_wait_against_the_static_split(week):
    static, federated = week
    assert federated.moves > 0 and federated.p95_wait_min["ray"] < static.p95_wait_min["ray"] / 4
    assert federated.utilisation >= static.utilisation


def test_the_same_seed_replays_the_same_week():
    jobs = rebalance_week.generate(11)
    assert [(j.pool, j.gpus, j.submitted_at) for j in jobs[:50]] == [
        (j.pool, j.gpus, j.submitted_at) for j in rebalance_week.generate(11)[:50]
    ]
