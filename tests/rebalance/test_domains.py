"""Machines move only within their hardware domain (issue 35 item 3): a second site whose node names repeat the
first's is a pool of its own; its plans name, drain and move its own rows, never the shared site's namesakes."""

from datetime import timedelta

import pytest
from django.utils import timezone

from scheduling.models import Node, Orchestrator
from scheduling.services import rebalance

from .conftest import MONDAY_9

pytestmark = pytest.mark.django_db


@pytest.fixture
def second_site(federation):
    """k8s-serving (the floor's pool) moves to site-b, beside slurm-b, whose idle nodes are named slurm0..2 like
    three of slurm-hpc's in the shared domain."""
    k8s = federation["orchs"]["k8s-serving"]
    Orchestrator.objects.filter(pk=k8s.pk).update(node_domain="site-b")
    Node.objects.filter(orchestrator=k8s).update(domain="site-b")
    slurm_b = Orchestrator.objects.create(name="slurm-b", kind="slurm", endpoint="demo://slurm-b", node_domain="site-b")
    for i in range(3):
        Node.objects.create(orchestrator=slurm_b, domain="site-b", name=f"slurm{i}", gpu_model="H100", gpu_total=8)
    return slurm_b


def test_a_floor_in_another_domain_takes_machines_of_that_domain_only(second_site, inference_floor, cast):
    proposal = rebalance.propose_plan(MONDAY_9)
    moves = list(proposal.plan.moves.select_related("node", "source", "target"))
    # On main: the shared slurm-hpc (6 idle nodes) gave k8s-serving nodes it cannot reach.
    assert moves and {(m.source.name, m.target.name) for m in moves} == {("slurm-b", "k8s-serving")}
    assert {m.node.domain for m in moves} == {"site-b"} and all(m.node.orchestrator == second_site for m in moves)
    assert set(proposal.plan.expected_effect["held_gpus"]) == {m.node.key for m in moves}
    assert all(key.endswith("@site-b") for key in proposal.plan.expected_effect["held_gpus"])
    plan = rebalance.approve_plan(proposal.plan, by=cast["admin"], reason="floor at 9")
    rebalance.apply_step(plan.pk, MONDAY_9)
    moved = {m.node.pk for m in moves}
    assert set(Node.objects.filter(pk__in=moved).values_list("state", flat=True)) == {Node.State.DRAINING}
    namesakes = Node.objects.filter(domain="", name__in=[m.node.name for m in moves])
    assert set(namesakes.values_list("state", flat=True)) == {Node.State.IDLE}  # the shared site's: untouched
    rebalance.apply_step(plan.pk, MONDAY_9)
    Node.objects.filter(pk__in=moved).update(last_seen_at=timezone.now() + timedelta(minutes=1))
    assert rebalance.apply_step(plan.pk, MONDAY_9).finished
    assert set(Node.objects.filter(pk__in=moved).values_list("orchestrator__name", flat=True)) == {"k8s-serving"}
    assert set(namesakes.values_list("orchestrator__name", flat=True)) == {"slurm-hpc"}


def test_with_every_cluster_in_the_shared_domain_the_decision_is_todays(federation, inference_floor):
    moves = rebalance.decide_now(MONDAY_9).moves
    assert moves and {(m.source, m.target) for m in moves} == {("slurm-hpc", "k8s-serving")}
    assert all("@" not in m.node for m in moves)
