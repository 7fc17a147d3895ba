"""Issue 29 (items 2, 3, 4, 8): promises hold through sub-teams, grants name orchestrators that can serve them,
and every door that writes queues, grants or the team tree (the API, the Django admin) goes through the same
checks with a reason."""

from decimal import Decimal

import pytest
from django.core.exceptions import ValidationError

from scheduling.models import Node, Orchestrator, Queue, QuotaGrant, QuotaRequest, Team
from scheduling.services import governance, quota

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


def _team_form(team, parent, reason="reorganisation"):
    return {
        "slug": team.slug,
        "name": team.name,
        "parent": parent.pk if parent else "",
        "description": "",
        "change_reason": reason,
        "memberships-TOTAL_FORMS": "0",
        "memberships-INITIAL_FORMS": "0",
        "memberships-MIN_NUM_FORMS": "0",
        "memberships-MAX_NUM_FORMS": "1000",
    }


def test_re_parenting_a_sub_team_to_the_top_level_in_the_admin_is_refused_when_its_guarantee_breaks_a_promise(
    client, cast, teams, demo_like_fleet
):
    Queue.objects.filter(team=teams["nlp"]).update(weight=0)  # the top-level weights stay within 100 %
    client.force_login(cast["admin"])
    page = client.post(f"/admin/scheduling/team/{teams['nlp'].pk}/change/", _team_form(teams["nlp"], None))
    assert page.status_code == 200
    errors = page.context["adminform"].form.errors["parent"]
    assert errors[0].startswith("nlp at the top level: top-level guarantees")
    assert "would be 351 on the fleet's 320 GPUs" in errors[0]
    assert Team.objects.get(slug="nlp").parent_id == teams["research"].pk


def test_a_re_parenting_that_keeps_every_promise_is_saved_with_its_reason(client, cast, teams, queues):
    Queue.objects.filter(team=teams["nlp"]).update(weight=0)
    client.force_login(cast["admin"])
    page = client.post(
        f"/admin/scheduling/team/{teams['nlp'].pk}/change/", _team_form(teams["nlp"], None, "nlp is its own org")
    )
    assert page.status_code == 302
    moved = Team.objects.get(slug="nlp")
    assert moved.parent_id is None
    assert moved.history.first().history_change_reason == "nlp is its own org"
    assert moved.history.first().history_user == cast["admin"]


def test_a_team_cannot_be_made_its_own_ancestor_in_the_admin_or_the_service(client, cast, teams, queues):
    client.force_login(cast["admin"])
    llm = Team.objects.create(slug="llm", name="LLM", parent=teams["nlp"])
    page = client.post(f"/admin/scheduling/team/{teams['research'].pk}/change/", _team_form(teams["research"], llm))
    assert page.status_code == 200
    assert "research cannot be placed under llm" in page.context["adminform"].form.errors["parent"][0]
    assert Team.objects.get(slug="research").parent_id is None
    research = Team.objects.get(slug="research")
    research.parent = research
    with pytest.raises(ValidationError, match="its own ancestor"):
        governance.save_team(research, by=cast["admin"], reason="loop")
    assert Team.objects.get(slug="research").parent_id is None


def test_the_queue_admin_counts_a_sub_team_guarantee_its_parent_does_not_hold(client, cast, teams, demo_like_fleet):
    client.force_login(cast["admin"])
    form = {
        "team": teams["nlp"].pk,
        "gpu_model": "H100",
        "weight": "100",
        "guaranteed": "160",
        "burst_limit": "192",
        "change_reason": "h100 for nlp",
    }
    page = client.post("/admin/scheduling/queue/add/", form)
    assert page.status_code == 200
    assert "would be 447 on the fleet's 320 GPUs" in page.context["adminform"].form.errors["guaranteed"][0]
    assert not Queue.objects.filter(gpu_model="H100").exists()
    page = client.post("/admin/scheduling/queue/add/", {**form, "guaranteed": "33"})
    assert page.status_code == 302
    assert Queue.objects.get(gpu_model="H100").history.first().history_change_reason == "h100 for nlp"


def test_a_live_grant_cannot_be_edited_or_deleted_in_the_admin(client, cast, teams, queues, period):
    start, end = period
    request = quota.create_request(
        requester=cast["researcher"], team=teams["nlp"], gpus=8, starts_at=start, ends_at=end, justification="x"
    )
    grant = quota.approve_request(request.pk, by=cast["admin"])
    client.force_login(cast["admin"])
    url = f"/admin/scheduling/quotagrant/{grant.pk}/change/"
    form = {"team": teams["nlp"].pk, "gpus": "500", "gpu_model": "", "starts_at_0": "", "ends_at_0": ""}
    client.post(url, form)
    client.post(f"/admin/scheduling/quotarequest/{request.pk}/change/", {"gpus": "500"})
    assert QuotaGrant.objects.get(pk=grant.pk).gpus == 8 and QuotaRequest.objects.get(pk=request.pk).gpus == 8
    assert client.post(f"/admin/scheduling/quotagrant/{grant.pk}/delete/", {"post": "yes"}).status_code == 403
    assert QuotaGrant.objects.filter(pk=grant.pk).exists()


def test_a_team_name_a_governed_orchestrator_cannot_use_is_refused_on_save_naming_it_and_the_rule(client, cast, teams):
    Orchestrator.objects.create(name="k8s-a", kind="kubernetes", endpoint="https://k8s.example")
    client.force_login(cast["admin"])
    form = {**_team_form(Team(slug="ML_Ops", name="ML Ops"), teams["research"]), "slug": "ML_Ops"}
    page = client.post("/admin/scheduling/team/add/", form)
    assert page.status_code == 200
    errors = page.context["adminform"].form.errors["slug"]
    assert "k8s-a: 'ML_Ops' names a queue and is not a DNS-1123 label" in errors[0]
    assert not Team.objects.filter(slug="ML_Ops").exists()
    assert client.post("/admin/scheduling/team/add/", {**form, "slug": "ml-ops"}).status_code == 302
