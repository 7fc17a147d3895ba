"""Against the real Slurm 22.05 fleet (scripts/slurm/start.sh): a plan moving two nodes from Slurm to
Kubernetes really drains them in Slurm (``scontrol show node`` says DRAIN), and a worker killed between
steps resumes correctly. The Kubernetes side records its verbs (label+uncordon) unless the live
Kubernetes fixture runs (``test_live_kubernetes.py``)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.db import connection

from scheduling.collectors.actuators import parse_scontrol_node
from scheduling.models import Node, NodeMove, Orchestrator, PoolPolicy, RebalancePlan
from scheduling.services import collection, rebalance
from tests.support import require_postgres

from . import live_support

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def federation(slurm_fleet, monkeypatch, django_user_model):
    monkeypatch.setenv("GPUPORTAL_SECRET_TEST_JWT", slurm_fleet.token)
    slurm = Orchestrator.objects.create(
        name="slurm-live", kind="slurm", endpoint=slurm_fleet.url, credentials_ref="env:GPUPORTAL_SECRET_TEST_JWT",
        options={"user": slurm_fleet.user, "api_version": "v0.0.38",
                 "rebalance": {"dry_run": False, "slurm_conf": slurm_fleet.env["SLURM_CONF"]}},
    )
    k8s = Orchestrator.objects.create(name="k8s-live", kind="kubernetes", endpoint="https://k8s.invalid",
                                      options={"rebalance": {"dry_run": False}})
    assert collection.scrape(slurm.pk).run.ok
    PoolPolicy.objects.create(orchestrator=k8s, name="inference floor", weekdays=list(range(1, 8)),
                              start_time="00:00", end_time="00:00", floor_gpus=16)
    admin = django_user_model.objects.create_user("ada", password="pw", is_staff=True, is_superuser=True)
    plan = rebalance.propose_plan().plan
    assert plan is not None and plan.moves.count() == 2
    rebalance.approve_plan(plan, by=admin, reason="live test: inference needs two nodes")
    names = list(plan.moves.values_list("node__name", flat=True))
    live_support.CALLS.clear()
    yield plan, names, slurm_fleet
    for name in names:  # leave the shared fleet as we found it
        if "DRAIN" in _slurm_state(slurm_fleet, name)[1]:
            slurm_fleet.run("scontrol", "update", f"nodename={name}", "state=resume")


def _slurm_state(fleet, node: str) -> tuple[str, set[str]]:
    base, flags, _reason = parse_scontrol_node(fleet.run("scontrol", "show", "node", node, "-o"))
    return base, flags


def _apply_until_done(plan: RebalancePlan, timeout: float = 60) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        outcome = rebalance.apply_step(plan.pk, verbs=live_support.verbs)
        if outcome.finished:
            return outcome.plan_state
        time.sleep(1)
    raise TimeoutError(f"plan still {outcome.plan_state}: {outcome.message}")


def test_a_plan_moving_two_nodes_drains_them_in_slurm_and_hands_them_to_kubernetes(federation):
    plan, names, fleet = federation
    rebalance.apply_step(plan.pk, verbs=live_support.verbs)
    for name in names:
        assert "DRAIN" in _slurm_state(fleet, name)[1], fleet.run("scontrol", "show", "node", name)
    assert _apply_until_done(plan) == RebalancePlan.State.APPLIED
    for name in names:
        base, flags = _slurm_state(fleet, name)
        assert base == "idle" and "DRAIN" in flags  # Slurm keeps it drained: not owned twice
        assert Node.objects.get(name=name).orchestrator.name == "k8s-live"
        assert ("label+uncordon", name) in live_support.CALLS


def test_a_worker_killed_between_steps_leaves_the_plan_resumable_and_it_finishes(federation):
    require_postgres()  # the worker subprocess must share the test database
    plan, names, fleet = federation
    db = connection.settings_dict
    host = f"{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}"
    url = f"postgres://{db['USER']}:{db['PASSWORD'] or ''}@{host}/{db['NAME']}"
    env = {**os.environ, "DATABASE_URL": url, "DJANGO_SETTINGS_MODULE": "gpuportal.settings_test",
           "PYTHONPATH": str(REPO)}
    worker = subprocess.Popen([sys.executable, "-c", live_support.WORKER, str(plan.pk)], cwd=REPO, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and worker.poll() is None:
            if set(plan.moves.values_list("state", flat=True)) == {NodeMove.State.DRAINING}:
                break
            time.sleep(0.2)
        assert worker.poll() is None, worker.communicate()
        os.kill(worker.pid, signal.SIGKILL)  # the worker dies between the drain step and the hand-over
        worker.wait(timeout=10)
    finally:
        if worker.poll() is None:
            worker.kill()
    plan.refresh_from_db()
    assert plan.state == RebalancePlan.State.APPLYING
    assert all("DRAIN" in _slurm_state(fleet, n)[1] for n in names)
    assert _apply_until_done(plan) == RebalancePlan.State.APPLIED
    assert set(Node.objects.filter(name__in=names).values_list("orchestrator__name", flat=True)) == {"k8s-live"}
    assert {n for verb, n in live_support.CALLS if verb == "label+uncordon"} == set(names)
