"""A what-if's baseline and scenario fanned out over Celery (a chord): the stored JSON is the serial run's;
without a result backend both run here as before; a failed half fails the row with nothing stored."""

from __future__ import annotations

import json
import time

import pytest

from scheduling.engine.calendar import PolicyRule
from scheduling.engine.types import Node, Request, TeamSpec, TopologyLevel, WorkloadKind
from scheduling.models import WhatIfScenario
from scheduling.services import whatif
from scheduling.simulation.whatif import WhatIfInputs, inputs_as_json, inputs_from_json
from scheduling.traces.records import TraceJob
from tests.app.test_services_live import worker  # noqa: F401  (a real `celery worker` process on Redis)
from tests.support import in_process_app

pytestmark = pytest.mark.django_db

INPUTS = {"weeks": 2, "fleet": [{"gpu_model": "H100", "nodes": -4}], "weights": {"nlp": "60"}}
NO_FLEET_LEFT = {"weeks": 2, "fleet": [{"gpu_model": "H100", "nodes": -8}]}  # allowed; its replay cannot run


def _submit(cast, teams, inputs=INPUTS, name="fan-out"):
    return whatif.submit(name=name, raw_inputs=inputs, by=cast["lead"], team=teams["research"])


def _without_timings(results):
    """The stored JSON less the two figures no two runs share (CPU and wall time)."""
    kept = {key: value for key, value in results.items() if key != "cpu_time_s"}
    return {key: ({k: v for k, v in value.items() if k != "wall_time_s"} if key in whatif.HALVES else value)
            for key, value in kept.items()}


def _finished(pk):
    for _ in range(1200):  # polls until the worker finishes (bounded, never a timing assertion)
        row = WhatIfScenario.objects.get(pk=pk)
        if row.status in (WhatIfScenario.Status.DONE, WhatIfScenario.Status.FAILED):
            return row
        time.sleep(0.1)
    return row


def test_the_inputs_survive_a_json_message_exactly():
    request = Request(
        "slurm:7", members=2, gpus_per_member=4, gpu_models=frozenset({"H100", "A100"}),
        topology=TopologyLevel.NVLINK_DOMAIN, topology_required=True, team="nlp", priority=3,
        kind=WorkloadKind.INFERENCE, duration_estimate_s=3600.5, submitted_at=12.25, orchestrator="slurm",
        latency_sla_ms=40.0,
    )
    inputs = WhatIfInputs(
        jobs=(TraceJob(request, 12.25, 1800.125), TraceJob(Request("k8s:1", team="cv"), 0.0, None)),
        nodes=(Node("dgx00", 8, "H100", gpu_free_milli=(1000, 500), nvlink_domain="nvl0", orchestrator="slurm"),),
        teams=(TeamSpec("research"), TeamSpec("nlp", "research", 60.0, 8, None)),
        rules=(PolicyRule("business hours", "kubernetes", frozenset({5, 1, 3}), 480, 1200, 16, None),),
        epoch_minute_of_week=1234,
        seed=7,
        horizon_s=86400.0,
    )

    assert inputs_from_json(json.loads(json.dumps(inputs_as_json(inputs)))) == inputs


def test_in_process_both_halves_run_here_one_after_the_other_and_the_row_is_done(cast, teams, recorded):
    scenario = whatif.run_scenario(_submit(cast, teams).pk, app=in_process_app())

    assert scenario.status == WhatIfScenario.Status.DONE and scenario.progress == 100
    assert set(scenario.results) == {"history", "baseline", "scenario", "cpu_time_s"}
    assert scenario.results["baseline"]["capacity_gpus"] == 64 and scenario.results["scenario"]["capacity_gpus"] == 32


def test_a_failed_half_fails_the_run_with_the_reason_and_stores_nothing(cast, teams, recorded):
    scenario = whatif.run_scenario(_submit(cast, teams, NO_FLEET_LEFT).pk, app=in_process_app())

    assert scenario.status == WhatIfScenario.Status.FAILED
    assert scenario.error == "the scenario: the fleet has no nodes: nothing to replay on"
    assert scenario.results == {}
    # A late store (another half's chord callback) leaves the failed row as it is.
    late = [{"half": half, "figures": {"capacity_gpus": 1}, "cpu_time_s": 1.0} for half in whatif.HALVES]
    assert not whatif.store_results(late, scenario.pk, {"jobs": 1}, 0.0)
    scenario.refresh_from_db()
    assert scenario.status == WhatIfScenario.Status.FAILED and scenario.results == {}


@pytest.mark.services
@pytest.mark.django_db(transaction=True)
def test_a_real_worker_fans_the_halves_out_and_stores_the_serial_json(worker, cast, teams, recorded):  # noqa: F811
    fanned = _submit(cast, teams, name="fanned")
    broken = _submit(cast, teams, NO_FLEET_LEFT, name="broken")

    answer = worker.send_task("scheduling.tasks.run_whatif", args=[fanned.pk]).get(timeout=300)
    worker.send_task("scheduling.tasks.run_whatif", args=[broken.pk])

    assert answer == {"scenario": fanned.pk, "status": "running"}  # the halves went out as a chord
    row = _finished(fanned.pk)
    assert row.status == WhatIfScenario.Status.DONE and row.progress == 100, row.error
    serial = _submit(cast, teams, name="serial")
    WhatIfScenario.objects.filter(pk=serial.pk).update(created_at=row.created_at)
    here = whatif.run_scenario(serial.pk, app=in_process_app())
    assert json.dumps(_without_timings(row.results), sort_keys=True) == json.dumps(
        _without_timings(here.results), sort_keys=True
    )
    failed = _finished(broken.pk)
    assert failed.status == WhatIfScenario.Status.FAILED and failed.results == {}
    assert failed.error == "the scenario: the fleet has no nodes: nothing to replay on"


def test_a_half_stopped_at_its_time_limit_fails_the_row_saying_so(cast, teams, recorded, monkeypatch):
    from celery.exceptions import SoftTimeLimitExceeded

    from scheduling import tasks

    def out_of_time(*args, **kwargs):
        raise SoftTimeLimitExceeded()

    scenario = _submit(cast, teams)
    WhatIfScenario.objects.filter(pk=scenario.pk).update(status=WhatIfScenario.Status.RUNNING)
    baseline, _, _ = whatif.build_runs(scenario.inputs, scenario.created_at)
    monkeypatch.setattr(whatif, "run_whatif", out_of_time)
    with pytest.raises(SoftTimeLimitExceeded):
        tasks.run_whatif_half({"scenario": scenario.pk, "half": "baseline", "inputs": inputs_as_json(baseline)})
    scenario.refresh_from_db()
    assert scenario.status == WhatIfScenario.Status.FAILED and scenario.results == {}
    assert scenario.error.startswith("Stopped at the time limit of")
