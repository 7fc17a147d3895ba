"""Replays fanned out over Celery (capacity search rounds, seeds): the same figures as run here, serially."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from celery import Celery

from scheduling.services.simulation_runs import replay_figures, run_replays, search_capacity
from tests.app.test_services_live import worker  # noqa: F401  (a real `celery worker` process on Redis)

TRACE = str(Path(__file__).resolve().parents[1] / "traces" / "fixtures" / "philly_slice.csv")
SEEDS = [{"trace": TRACE, "policy": "federated", "capacity_gpus": 32, "seed": seed} for seed in (0, 1, 2)]


def as_json(value: object) -> object:
    """What a result backend hands back (tuples become lists)."""
    return json.loads(json.dumps(value))


def test_without_a_result_backend_the_replays_run_here_in_order() -> None:
    in_process = Celery("no-backend", set_as_current=False)  # nothing could collect a worker's answer

    runs = run_replays(SEEDS, app=in_process)

    assert [run["seed"] for run in runs] == [0, 1, 2]
    assert runs[1] == replay_figures(SEEDS[1])
    assert "wall_time_s" not in runs[0]


def test_a_bad_spec_is_refused_naming_the_field() -> None:
    app = Celery("no-backend", set_as_current=False)
    with pytest.raises(ValueError, match="'capacity'"):
        run_replays([{"trace": TRACE, "policy": "federated", "capacity": 32}], app=app)
    with pytest.raises(ValueError, match="'policy' is required"):
        run_replays([{"trace": TRACE}], app=app)


def test_bad_on_error_is_refused_by_name() -> None:
    app = Celery("no-backend", set_as_current=False)
    with pytest.raises(ValueError, match="on_error 'ignore'"):
        run_replays([{"trace": TRACE, "policy": "federated", "on_error": "ignore"}], app=app)


def test_a_search_reports_each_round_and_replays_a_capacity_once(tmp_path: Path) -> None:
    from scheduling.simulation.capacity import TargetUnreachable

    # one 2 x 8-GPU gang: rejected on one node, so every team's p95 is infinite at 8 GPUs
    path = tmp_path / "gang.csv"
    path.write_text(
        "id,submit_time,duration,gang_size,gpus_per_member,gpu_model,team,kind\nw1,0,600,2,8,,wide,training\n",
        encoding="utf-8",
    )
    app = Celery("no-backend", set_as_current=False)
    rounds: list[list[tuple[int, dict[str, object]]]] = []

    with pytest.raises(TargetUnreachable, match=r"up to 8 GPUs \(the search's ceiling\)"):
        search_capacity(
            {"trace": str(path), "policy": "best-fit"}, low=8, high=8, step=8, target="every-team",
            app=app, ceiling=8, on_round=rounds.append,
        )

    # low == high: the search asks for 8 GPUs twice (low end, then high end) but it is replayed once
    assert [[capacity for capacity, _ in batch] for batch in rounds] == [[8]]
    assert rounds[0][0][1]["jobs"]["rejected"] == 1


@pytest.mark.services
@pytest.mark.django_db(transaction=True)
def test_a_real_worker_gives_the_serial_figures_for_seeds_and_a_capacity_search(worker) -> None:  # noqa: F811
    serial_app = Celery("no-backend", set_as_current=False)

    fanned = run_replays(SEEDS, app=worker)

    assert fanned == as_json(run_replays(SEEDS, app=serial_app))
    spec = {"trace": TRACE, "policy": "best-fit"}
    bracket = {"low": 8, "high": 64, "step": 8, "target": "every-team", "target_hours": 0.5}
    serial = search_capacity(spec, **bracket, app=serial_app)
    wide = search_capacity(spec, **bracket, width=2, app=worker)
    assert (wide.capacity_gpus, wide.largest_failing_gpus) == (serial.capacity_gpus, serial.largest_failing_gpus)
    common = set(dict(serial.probes)) & set(dict(wide.probes))
    assert common and all(dict(serial.probes)[c] == dict(wide.probes)[c] for c in common)
