"""Issue 36 (High 2/3, extended to the governance plans): a reclaim plan or an enforcement plan an admin approves
carries the version the page or the API showed; a plan changed since (a newer round superseded it) is refused
naming who changed what and when: the page says so, the API answers 412. Decided on the current version, it
goes through as before."""

from html import unescape

import pytest
from django.urls import reverse
from rest_framework.test import APIClient

from scheduling.models import EnforcementPlan, ReclaimPlan
from scheduling.services import reclaim
from scheduling.services.enforcement import rounds as enforcement_rounds
from tests.app import test_enforcement as base
from tests.app.test_enforcement import governed
from tests.app.test_reclaim import borrowed  # noqa: F401  (recsys borrows hpc, nlp waits for its guarantee)

from .forms import form_fields

pytestmark = pytest.mark.django_db
clusters, hpc = base.clusters, base.hpc  # fake clusters and the auto-mode Slurm orchestrator "hpc"


@pytest.fixture
def queued(monkeypatch) -> list[int]:
    from scheduling import tasks

    calls: list[int] = []
    monkeypatch.setattr(tasks.apply_reclaim_plan, "delay", calls.append)
    return calls


@pytest.fixture
def review_plan(queues, cast, hpc, clusters):
    """hpc-review (governance in review mode) waits on a plan of the changes the round found."""
    governed("hpc-review", mode="review")
    enforcement_rounds.reconcile()
    return EnforcementPlan.objects.get(state="pending", orchestrator__name="hpc-review")


def _supersede_enforcement_plan(queues) -> EnforcementPlan:
    """A fair-share edit, then the next round: its newer diff supersedes the plan nobody decided yet."""
    research = queues["research"]
    research.weight += 5
    research.save()
    enforcement_rounds.reconcile()
    return EnforcementPlan.objects.get(state="pending", orchestrator__name="hpc-review")


def _admin_api(cast) -> APIClient:
    api = APIClient()
    api.force_authenticate(cast["admin"])
    return api


def test_a_reclaim_plan_superseded_between_page_load_and_approve_is_refused_naming_the_change(
    client, cast, borrowed, queued  # noqa: F811
):
    plan = reclaim.reclaim_round(borrowed.pk)
    client.force_login(cast["admin"])
    shown = form_fields(client.get(reverse("reclaim")).content.decode(), having="version")  # on main: no version
    assert shown["version"] == "1"
    newer = reclaim.reclaim_round(borrowed.pk)  # the next round: a newer decision supersedes the plan on the page
    assert newer.pk != plan.pk
    answer = client.post(
        reverse("reclaim-decide", args=[plan.pk]), {**shown, "decision": "approve", "reason": "ok"}, follow=True
    )
    text = unescape(answer.content.decode())
    assert f"Reclaim plan #{plan.pk} changed since you loaded it (your version 1, now 2)" in text
    assert "by the portal" in text and "(superseded by a newer reclaim decision): state pending → superseded" in text
    assert ReclaimPlan.objects.get(pk=plan.pk).state == ReclaimPlan.State.SUPERSEDED and queued == []


def test_a_reclaim_plan_decided_on_its_current_version_is_approved(client, cast, borrowed, queued):  # noqa: F811
    plan = reclaim.reclaim_round(borrowed.pk)
    client.force_login(cast["admin"])
    shown = form_fields(client.get(reverse("reclaim")).content.decode(), having="version")
    client.post(reverse("reclaim-decide", args=[plan.pk]), {**shown, "decision": "approve", "reason": "ok"})
    assert ReclaimPlan.objects.get(pk=plan.pk).state == ReclaimPlan.State.APPROVED and queued == [plan.pk]


def test_the_reclaim_api_gives_an_etag_and_answers_412_to_a_stale_if_match(cast, borrowed, queued):  # noqa: F811
    api = _admin_api(cast)
    plan = reclaim.reclaim_round(borrowed.pk)
    read = api.get(f"/api/v1/reclaim-plans/{plan.pk}/")
    assert read["ETag"] == '"1"' and read.json()["version"] == 1  # on main: no ETag
    reclaim.reclaim_round(borrowed.pk)
    approve = f"/api/v1/reclaim-plans/{plan.pk}/approve/"
    refused = api.post(approve, {"reason": "ok"}, format="json", HTTP_IF_MATCH=read["ETag"])
    assert refused.status_code == 412
    assert "state pending → superseded" in refused.json()["version"][0]
    stale_body = api.post(approve, {"reason": "ok", "version": 1}, format="json")  # the body's version, no header
    assert stale_body.status_code == 412 and queued == []


def test_an_enforcement_plan_superseded_between_page_load_and_approve_is_refused_naming_the_change(
    client, cast, queues, review_plan
):
    client.force_login(cast["admin"])
    page = client.get(reverse("governance")).content.decode()  # slurm-a (review mode too) may wait on a plan
    shown = form_fields(page, having="version", where={"pk": str(review_plan.pk)})
    assert shown["version"] == "1"
    newer = _supersede_enforcement_plan(queues)
    assert newer.pk != review_plan.pk
    answer = client.post(reverse("governance"), {**shown, "decision": "approve", "reason": "ok"}, follow=True)
    text = unescape(answer.content.decode())
    assert f"Enforcement plan #{review_plan.pk} changed since you loaded it (your version 1, now 2)" in text
    assert "(superseded by a newer diff): state pending → superseded" in text
    assert EnforcementPlan.objects.get(pk=review_plan.pk).state == EnforcementPlan.State.SUPERSEDED
    assert EnforcementPlan.objects.get(pk=newer.pk).state == EnforcementPlan.State.PENDING


def test_the_governance_plans_api_answers_412_to_a_stale_if_match_and_approves_the_current_one(
    cast, queues, review_plan
):
    api = _admin_api(cast)
    read = api.get(f"/api/v1/governance/plans/{review_plan.pk}/")
    assert read["ETag"] == '"1"'
    newer = _supersede_enforcement_plan(queues)
    refused = api.post(
        f"/api/v1/governance/plans/{review_plan.pk}/approve/", {"reason": "ok"}, format="json", HTTP_IF_MATCH='"1"'
    )
    assert refused.status_code == 412 and "superseded by a newer diff" in refused.json()["version"][0]
    current = api.get(f"/api/v1/governance/plans/{newer.pk}/")
    approved = api.post(
        f"/api/v1/governance/plans/{newer.pk}/approve/", {"reason": "ok"}, format="json", HTTP_IF_MATCH=current["ETag"]
    )
    assert approved.status_code == 200 and approved.json()["state"] == "approved" and approved.json()["version"] == 2
