"""Issue 29 (items 2, 3, 4, 8): promises hold through sub-teams, grants name orchestrators that can serve them,
and every door that writes queues, grants or the team tree (the API, the Django admin) goes through the same
checks with a reason."""

from decimal import Decimal

import pytest

from scheduling.models import Queue, Team

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
