"""What-if: validation naming the field, results equal to a direct simulator run, progress, pages per role."""

import json
from dataclasses import replace

import pytest
from django.core.exceptions import ValidationError

from scheduling.engine.types import Node as EngineNode
from scheduling.engine.types import TeamSpec
from scheduling.models import WhatIfScenario
from scheduling.selectors.planning import history_trace_jobs
from scheduling.services import whatif
from scheduling.simulation.federation import Federation
from scheduling.simulation.replay import Replay
from scheduling.simulation.runner import pools_for
from scheduling.simulation.scenario import Scenario

pytestmark = pytest.mark.django_db

INPUTS = {"weeks": 2, "fleet": [{"gpu_model": "H100", "nodes": -4}], "weights": {"nlp": "60"}}


def _submit(cast, teams, inputs=INPUTS, who="lead"):
    return whatif.submit(name="smaller fleet", raw_inputs=inputs, by=cast[who], team=teams["research"])


def _direct_run(jobs, node_names, weights):
    """The simulator alone, on inputs written out by hand from the fixtures (no portal code)."""
    k8s_nodes = {"dgx06", "dgx07"}
    nodes = tuple(
        EngineNode(
            name=f"dgx{i:02d}",
            gpu_total=8,
            gpu_model="H100",
            nvlink_domain=f"nvl{i:02d}",
            leaf_switch=f"leaf{i // 4}",
            spine="spine0",
            orchestrator="kubernetes" if f"dgx{i:02d}" in k8s_nodes else "slurm",
        )
        for i in range(8)
        if f"dgx{i:02d}" in node_names
    )
    teams = (
        TeamSpec("nlp", "research", weights.get("nlp", 100.0), 8, 32),
        TeamSpec("production", None, 60.0, 24, 64),
        TeamSpec("research", None, 40.0, 16, 48),
    )
    scenario = Scenario({}, teams, {}, ())
    replay = Replay(
        jobs,
        pools_for("federated", nodes, scenario, jobs),
        scenario,
        policy="federated",
        seed=0,
        federation=Federation(),
    )
    return replay.run().as_dict()


def _comparable(figures):
    return {k: v for k, v in figures.items() if k not in ("wall_time_s", "scenario")}


def test_what_if_results_equal_a_direct_simulator_run_on_the_same_inputs(cast, teams, recorded):
    scenario = _submit(cast, teams)
    done = whatif.run_scenario(scenario.pk)
    assert done.status == WhatIfScenario.Status.DONE and done.progress == 100
    jobs = history_trace_jobs(done.created_at, 2).jobs
    assert done.results["history"]["jobs"] == len(jobs) == 302
    baseline = _direct_run(jobs, {f"dgx{i:02d}" for i in range(8)}, {})
    changed = _direct_run(jobs, {f"dgx{i:02d}" for i in range(4)}, {"nlp": 60.0})
    for stored, direct in ((done.results["baseline"], baseline), (done.results["scenario"], changed)):
        stored_figures = {
            k: v for k, v in stored.items() if k not in ("waits_by_team", "floor_breaches", "capacity_by_model")
        }
        assert _comparable(stored_figures) == json.loads(json.dumps(_comparable(direct)))
    assert done.results["scenario"]["capacity_gpus"] == 32 and done.results["baseline"]["capacity_gpus"] == 64
    assert done.results["scenario"]["wait_hours"]["all"]["mean"] > done.results["baseline"]["wait_hours"]["all"]["mean"]


def test_the_run_reports_floor_hours_and_progress_as_it_goes(cast, teams, recorded, monkeypatch):
    seen: list[int] = []
    real = whatif._progress

    def recording(pk, offset):
        report = real(pk, offset)

        def wrapped(done, total):
            report(done, total)
            seen.append(WhatIfScenario.objects.get(pk=pk).progress)

        return wrapped

    monkeypatch.setattr(whatif, "_progress", recording)
    policy = {
        "orchestrator": "k8s",
        "weekdays": [1, 2, 3, 4, 5, 6, 7],
        "start": "00:00",
        "end": "00:00",
        "floor_gpus": 48,
    }
    done = whatif.run_scenario(_submit(cast, teams, {"weeks": 2, "policies": [policy]}).pk)
    assert seen == sorted(seen) and seen[0] < 50 <= seen[-1] < 100 and done.progress == 100
    base, new = done.results["baseline"]["floor_breaches"], done.results["scenario"]["floor_breaches"]
    assert new["kubernetes"]["hours_with_floor"] > base["kubernetes"]["hours_with_floor"]  # all week vs business hours
    assert new["kubernetes"]["hours_breached"] >= base["kubernetes"]["hours_breached"]


@pytest.mark.parametrize(
    ("inputs", "field", "words"),
    [
        ({"fleet": [{"gpu_model": "H100", "nodes": -9}]}, "fleet", "the fleet has 8"),
        ({"fleet": [{"gpu_model": "H100", "nodes": 0}]}, "fleet", "must not be 0"),
        ({"weights": {"nlp": "140"}}, "weights", "between 0 and 100"),
        ({"weights": {"ghost": "10"}}, "weights", "no team 'ghost'"),
        ({"weeks": 0, "weights": {"nlp": "50"}}, "weeks", "between 1 and 12"),
        ({"policies": [{"orchestrator": "nope", "weekdays": [1]}]}, "policies", "must be one of"),
        (
            {"policies": [{"orchestrator": "k8s", "weekdays": [9], "start": "08:00", "end": "20:00"}]},
            "policies",
            "between 1 and 7",
        ),
        ({"quota_request": 999}, "quota_request", "no quota request #999"),
        ({}, "inputs", "change at least one"),
        ({"weights": {"nlp": "50"}, "colour": "red"}, "inputs", "unknown fields: colour"),
    ],
)
def test_bad_inputs_are_refused_naming_the_field_and_the_rule(cast, teams, recorded, inputs, field, words):
    with pytest.raises(ValidationError) as error:
        _submit(cast, teams, inputs)
    assert words in " ".join(error.value.message_dict[field])
    assert not WhatIfScenario.objects.exists()


def test_a_researcher_cannot_run_and_a_lead_only_for_a_team_they_lead(cast, teams, recorded):
    with pytest.raises(ValidationError, match="admins and team leads"):
        _submit(cast, teams, who="researcher")
    with pytest.raises(ValidationError, match="team you lead"):
        whatif.submit(name="x", raw_inputs=INPUTS, by=cast["lead"], team=teams["production"])


def test_an_approved_request_counts_as_an_extra_guarantee_in_the_scenario(cast, teams, recorded, period):
    from scheduling.services import quota

    request = quota.create_request(
        requester=cast["researcher"],
        team=teams["nlp"],
        gpus=8,
        starts_at=period[0],
        ends_at=period[1],
        justification="what-if",
    )
    quota.approve_request(request.pk, by=cast["admin"])
    specs = whatif.changed_teams(whatif.current_teams(), {}, request.pk)
    nlp = next(s for s in specs if s.name == "nlp")
    assert nlp.guaranteed == 16 and nlp.burst_limit == 32
    assert whatif.clean_inputs({"quota_request": request.pk})["quota_request"] == request.pk


def test_an_empty_history_fails_the_run_with_a_message(cast, teams, queues):
    done = whatif.run_scenario(_submit(cast, teams).pk)
    assert done.status == WhatIfScenario.Status.FAILED and "no recorded work" in done.error


def test_added_nodes_copy_an_existing_node_of_that_model():
    base = [EngineNode("a", 8, "H100", leaf_switch="l0"), EngineNode("b", 4, "A100")]
    grown = whatif.changed_nodes(
        base,
        [{"gpu_model": "H100", "nodes": 2, "gpus_per_node": None}, {"gpu_model": "L4", "nodes": 1, "gpus_per_node": 2}],
    )
    added = grown[2:]
    assert [(n.gpu_model, n.gpu_total) for n in added] == [("H100", 8), ("H100", 8), ("L4", 2)]
    assert len({n.name for n in grown}) == 5
    assert whatif.changed_nodes(base, [{"gpu_model": "H100", "nodes": -1, "gpus_per_node": None}]) == [base[1]]
    assert replace(base[0]) == base[0]


def test_nul_characters_are_refused_before_they_reach_the_database(cast, teams, recorded):
    with pytest.raises(ValidationError) as error:
        _submit(cast, teams, {"fleet": [{"gpu_model": "H\x00100", "nodes": 1}]})
    assert "NUL" in error.value.message_dict["inputs"][0]


def test_a_lead_cannot_apply_another_teams_approved_request(cast, teams, recorded, period):
    from scheduling.services import quota

    request = quota.create_request(
        requester=cast["outsider"],
        team=teams["production"],
        gpus=4,
        starts_at=period[0],
        ends_at=period[1],
        justification="theirs",
    )
    quota.approve_request(request.pk, by=cast["admin"])
    with pytest.raises(ValidationError) as error:
        _submit(cast, teams, {"quota_request": request.pk})
    assert error.value.message_dict["quota_request"] == [f"no quota request #{request.pk}"]
    assert whatif.submit(name="admin", raw_inputs={"quota_request": request.pk}, by=cast["admin"]).pk


def test_the_task_ignores_a_deleted_scenario_and_leaves_a_finished_one_alone(cast, teams, recorded):
    from scheduling import tasks

    assert tasks.run_whatif(987654) == {"scenario": 987654, "status": "missing"}
    done = whatif.run_scenario(_submit(cast, teams).pk)
    finished_at = done.finished_at
    assert tasks.run_whatif(done.pk) == {"scenario": done.pk, "status": "done"}
    done.refresh_from_db()
    assert done.finished_at == finished_at


def test_an_unexpected_error_marks_the_run_failed_before_it_propagates(cast, teams, recorded, monkeypatch):
    def broken(*args, **kwargs):
        raise KeyError("boom")

    monkeypatch.setattr(whatif, "run_whatif", broken)
    scenario = _submit(cast, teams)
    with pytest.raises(KeyError):
        whatif.run_scenario(scenario.pk)
    scenario.refresh_from_db()
    assert scenario.status == WhatIfScenario.Status.FAILED and "internal error: KeyError" in scenario.error


def test_the_comparison_reads_as_percent_hours_and_counts():
    figures = {"capacity_gpus": 64, "utilisation": 0.5, "wait_hours": {"all": {"p50": 0.0, "p95": 1.25, "p99": None}}}
    rows = {label: (base, new) for label, base, new in whatif.comparison({"baseline": figures, "scenario": {}})}
    assert rows["capacity (GPUs)"] == ("64", "—")
    assert rows["utilisation (GPU-hours asked / capacity)"] == ("50.0 %", "—")
    assert rows["wait p95 (h)"] == ("1.25", "—") and rows["wait p99 (h)"] == ("—", "—")
