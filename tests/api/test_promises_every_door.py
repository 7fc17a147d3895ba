"""Issue 29 (items 2, 3, 4, 8): promises hold through sub-teams, grants name orchestrators that can serve them,
and every door that writes queues, grants or the team tree (the API, the Django admin) goes through the same
checks with a reason."""

from decimal import Decimal

import pytest

from scheduling.models import Node, Orchestrator, Queue, QuotaGrant, QuotaRequest, Team

pytestmark = pytest.mark.django_db


def _queue(api, team, model, guaranteed, burst=320, weight="100"):
    body = {
        "team": team,
        "gpu_model": model,
        "weight": weight,
        "guaranteed": guaranteed,
        "burst_limit": burst,
        "reason": "audit",
    }
    return api("admin").post("/api/v1/queues/", body, format="json")


def test_a_sub_team_guarantee_of_a_model_its_parent_does_not_guarantee_is_counted_as_a_promise(api, demo_like_fleet):
    # 287 of 320 GPUs are guaranteed to the top-level teams (any model); nlp's parent has no H100 queue.
    refused = _queue(api, "nlp", "H100", 160)
    assert refused.status_code == 400
    assert "would be 447 on the fleet's 320 GPUs (128 A100 + 192 H100), 127 short" in refused.json()["guaranteed"][0]
    assert _queue(api, "nlp", "H100", 33).status_code == 201  # 287 + 33 = 320: fits exactly
    vision = Team.objects.create(slug="vision", name="Vision", parent=Team.objects.get(slug="production"))
    assert _queue(api, vision.slug, "A100", 1).status_code == 400  # the fleet is fully promised
    assert not Queue.objects.filter(team=vision).exists()


def test_the_four_calls_of_the_audit_promise_nothing_beyond_the_fleet(api, demo_like_fleet, teams):
    for slug in ("vision", "speech", "robotics", "rl"):
        Team.objects.create(slug=slug, name=slug, parent=teams["production"])
    codes = [_queue(api, slug, "H100", 160, weight="25").status_code for slug in ("vision", "speech", "robotics", "rl")]
    assert codes == [400, 400, 400, 400]
    promised = sum(q.guaranteed for q in Queue.objects.filter(gpu_model="H100"))
    assert promised == 0


def test_a_sub_team_guarantee_is_carved_out_of_the_nearest_ancestor_queue_of_its_model(api, demo_like_fleet, teams):
    assert _queue(api, "research", "H100", 10, weight="40").status_code == 201  # a promise: 297 of 320
    llm = Team.objects.create(slug="llm", name="LLM", parent=teams["nlp"])  # nlp has no H100 queue: research holds it
    refused = _queue(api, llm.slug, "H100", 11)
    assert refused.status_code == 400
    assert "more than their parent's 10 (research/H100)" in refused.json()["guaranteed"][0]
    assert _queue(api, llm.slug, "H100", 10).status_code == 201
    assert Queue.objects.get(team=llm).guaranteed == 10 and Queue.objects.get(team=llm).weight == Decimal(100)


def _ray_pool_of_a100():
    ray = Orchestrator.objects.create(name="ray-a", kind="ray", endpoint="http://ray.example:8265")
    for i in range(4):
        Node.objects.create(orchestrator=ray, name=f"ray{i}", gpu_model="A100", gpu_total=8)
    return ray


def _ask(api, period, gpus, model, orchestrator):
    start, end = period
    body = {
        "team": "nlp",
        "gpus": gpus,
        "gpu_model": model,
        "orchestrator": orchestrator,
        "starts_at": start.isoformat(),
        "ends_at": end.isoformat(),
        "justification": "rollouts",
    }
    return api("researcher").post("/api/v1/quota-requests/", body, format="json")


def test_a_request_naming_an_orchestrator_without_its_gpu_model_is_refused_naming_the_field(api, queues, period):
    _ray_pool_of_a100()
    refused = _ask(api, period, 40, "H100", "ray-a")
    assert refused.status_code == 400
    assert refused.json()["orchestrator"] == [
        "ray-a has no H100 GPUs (it has 32 A100): a grant there could never be enforced. "
        "Name another orchestrator or none."
    ]
    assert not QuotaRequest.objects.exists()
    assert _ask(api, period, 4, "A100", "ray-a").status_code == 201  # its own model, and any model, are fine
    assert _ask(api, period, 4, "", "ray-a").status_code == 201


def test_a_request_filed_around_the_rule_is_not_approved(api, queues, period, cast, teams):
    ray = _ray_pool_of_a100()
    start, end = period
    filed = QuotaRequest.objects.create(
        requester=cast["researcher"],
        team=teams["nlp"],
        gpus=40,
        gpu_model="H100",
        orchestrator=ray,
        starts_at=start,
        ends_at=end,
        justification="from before the rule",
        state=QuotaRequest.State.SUBMITTED,
    )
    approved = api("admin").post(f"/api/v1/quota-requests/{filed.pk}/approve/", {}, format="json")
    assert approved.status_code == 400 and "ray-a has no H100 GPUs" in approved.json()["orchestrator"][0]
    assert not QuotaGrant.objects.exists()
