"""The reclaim page (/reclaim/, issue 31 item 3): admins decide review-mode plans in the browser through the
services the API uses; leads and researchers read the plans touching their teams; an outsider sees none; what a
plan says of a team the reader may not see is redacted; a plan whose owner no longer waits says it is stale."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from scheduling import tasks
from scheduling.models import Membership, ReclaimPlan, Team, Workload
from scheduling.services import reclaim

from .test_reclaim import borrowed  # noqa: F401  (the fixture: recsys borrows hpc, nlp waits for its guarantee)

pytestmark = pytest.mark.django_db


@pytest.fixture
def plan(borrowed):  # noqa: F811
    made = reclaim.reclaim_round(borrowed.pk)
    assert made is not None and made.state == ReclaimPlan.State.PENDING
    return made


@pytest.fixture
def queued(monkeypatch) -> list[int]:
    """Plans handed to the apply task (its own tests run it: tests/app/test_reclaim.py)."""
    calls: list[int] = []
    monkeypatch.setattr(tasks.apply_reclaim_plan, "delay", calls.append)
    return calls


def _page(client, user) -> str:
    client.force_login(user)
    response = client.get(reverse("reclaim"))
    assert response.status_code == 200
    return response.content.decode()


def _decide(client, user, plan, decision, reason="nlp's ICML deadline"):
    client.force_login(user)
    return client.post(reverse("reclaim-decide", args=[plan.pk]), {"decision": decision, "reason": reason})


def test_anonymous_visitors_are_sent_to_log_in(client, plan):
    response = client.get(reverse("reclaim"))
    assert response.status_code == 302 and response["Location"].startswith(reverse("login"))
    assert client.post(reverse("reclaim-decide", args=[plan.pk]), {"decision": "approve", "reason": "x"}
                       ).status_code == 302
    plan.refresh_from_db()
    assert plan.state == ReclaimPlan.State.PENDING


def test_an_admin_sees_owner_guarantee_what_waited_each_victim_mode_and_cause(client, cast, plan):
    body = _page(client, cast["admin"])
    article = body[body.index(f'id="plan-{plan.pk}"'):]
    assert "nlp</strong> holds 0 of its 8 guaranteed GPUs on hpc" in article
    assert "<code>200</code> (8 GPUs) since " in article and "(10 min when planned)" in article
    assert "still waits" in article
    assert "Stop <code>102</code> of <strong>recsys</strong> · 8 GPUs" in article
    assert plan.reclaims[0]["victims"][0]["reason"] in article
    assert "mode <strong>review</strong>" in article and "dry run" in article
    assert "Cause: nlp held 0 of its 8 guaranteed GPUs; 200 (8 GPUs) waited" in article
    assert 'value="approve"' in article and 'value="reject"' in article and "csrfmiddlewaretoken" in article


def test_an_admin_approves_with_a_reason_the_plan_is_applied_audited_and_decided_once(client, cast, plan, queued):
    response = _decide(client, cast["admin"], plan, "approve")
    assert response.status_code == 302 and response["Location"] == reverse("reclaim")
    plan.refresh_from_db()
    assert plan.state == ReclaimPlan.State.APPROVED and plan.decided_by == cast["admin"]
    assert queued == [plan.pk]
    assert plan.history.filter(history_user=cast["admin"], history_change_reason="nlp's ICML deadline").exists()
    again = _decide(client, cast["admin"], plan, "reject", reason="changed my mind")
    plan.refresh_from_db()
    assert plan.state == ReclaimPlan.State.APPROVED and queued == [plan.pk]
    body = client.get(again["Location"]).content.decode()
    assert "only a pending plan can be decided; this one is approved" in body
    past = body[body.index('id="past"'):]
    assert "hpc" in past and "ada" in past and "nlp&#x27;s ICML deadline" in past


def test_a_reason_is_required_and_nothing_is_decided_without_one(client, cast, plan, queued):
    response = _decide(client, cast["admin"], plan, "approve", reason="  ")
    plan.refresh_from_db()
    assert plan.state == ReclaimPlan.State.PENDING and queued == []
    assert "reason" in client.get(response["Location"]).content.decode().lower()


def test_a_rejected_plan_stops_nothing_and_leaves_the_waiting_list(client, cast, plan, queued):
    _decide(client, cast["admin"], plan, "reject", reason="recsys demo today")
    plan.refresh_from_db()
    assert plan.state == ReclaimPlan.State.REJECTED and queued == []
    body = _page(client, cast["admin"])
    assert "No reclaim plan is waiting." in body and "recsys demo today" in body and "Rejected" in body


def test_the_decision_needs_the_csrf_token(cast, plan, queued):
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(cast["admin"])
    response = browser.post(reverse("reclaim-decide", args=[plan.pk]), {"decision": "approve", "reason": "x"})
    plan.refresh_from_db()
    assert response.status_code == 403 and plan.state == ReclaimPlan.State.PENDING and queued == []


@pytest.mark.parametrize("role", ["researcher", "lead", "nlp_lead"])
def test_the_owners_team_reads_the_plan_without_deciding_it_or_seeing_the_borrowers_job(client, cast, plan, role,
                                                                                      queued):
    body = _page(client, cast[role])
    article = body[body.index(f'id="plan-{plan.pk}"'):]
    assert "nlp</strong> holds 0 of its 8 guaranteed GPUs on hpc" in article and "<code>200</code>" in article
    assert "Stop a job of another team · 8 GPUs" in article
    assert "102" not in article and "recsys" not in body
    assert 'value="approve"' not in body and "portal admins decide them" in body
    assert _decide(client, cast[role], plan, "approve").status_code == 403
    plan.refresh_from_db()
    assert plan.state == ReclaimPlan.State.PENDING and queued == []


def test_the_borrowers_team_sees_its_job_named_and_the_owner_redacted(client, django_user_model, plan):
    member = django_user_model.objects.create_user("rex", password="pw")
    Membership.objects.create(user=member, team=Team.objects.get(slug="recsys"), role=Membership.Role.RESEARCHER)
    body = _page(client, member)
    article = body[body.index(f'id="plan-{plan.pk}"'):]
    assert "Stop <code>102</code> of <strong>recsys</strong>" in article
    assert "another team</strong> below its guarantee waits for 8 GPUs" in article
    assert "nlp" not in article and "<code>200</code>" not in article


def test_an_outsider_sees_nothing_of_other_teams_plans(client, cast, plan, queued):
    body = _page(client, cast["outsider"])
    assert "No reclaim plan is waiting." in body and "No reclaim plan has been decided yet." in body
    assert "nlp" not in body and "recsys" not in body and "hpc" not in body
    assert _decide(client, cast["outsider"], plan, "approve").status_code == 403
    reclaim.reject_reclaim_plan(plan.pk, by=cast["admin"], reason="decided")
    assert "hpc" not in _page(client, cast["outsider"])


def test_a_plan_whose_owner_no_longer_waits_says_it_is_stale_and_offers_only_reject(client, cast, plan):
    assert "stale" not in _page(client, cast["admin"])
    Workload.objects.filter(external_id="200").update(state=Workload.State.RUNNING)
    body = _page(client, cast["admin"])
    article = body[body.index(f'id="plan-{plan.pk}"'):]
    assert '<span class="badge bad">stale</span> No owner in this plan still waits' in article
    assert "no longer waits" in article and 'value="approve"' not in article and 'value="reject"' in article


def test_the_governance_page_and_the_navigation_link_the_waiting_plans(client, cast, plan):
    client.force_login(cast["admin"])
    body = client.get(reverse("governance")).content.decode()
    assert "1 waiting" in body and 'href="/reclaim/"' in body and "1 plan to take borrowed GPUs back" in body
    nav = _page(client, cast["researcher"])
    assert '<a href="/reclaim/"' in nav
    reclaim.reject_reclaim_plan(plan.pk, by=cast["admin"], reason="decided")
    client.force_login(cast["admin"])
    assert "No reclaim plan waits for a decision." in client.get(reverse("governance")).content.decode()


def test_the_decided_plans_download_as_csv(client, cast, plan):
    reclaim.reject_reclaim_plan(plan.pk, by=cast["admin"], reason="recsys demo today")
    client.force_login(cast["admin"])
    response = client.get(reverse("reclaim") + "?export=csv")
    assert response.status_code == 200 and response["Content-Type"].startswith("text/csv")
    lines = response.content.decode().splitlines()
    assert lines[0].startswith("Planned (UTC),Orchestrator,For (below guarantee),GPUs taken back")
    assert "hpc,nlp,8,review,Rejected" in lines[1] and "recsys demo today" in lines[1]


def test_the_api_lists_the_plans_by_the_same_rule(client, cast, plan):
    """The REST list followed no rule before the page: an outsider read every team's reclaims."""
    for role, listed in (("admin", [plan.pk]), ("researcher", [plan.pk]), ("lead", [plan.pk]), ("outsider", [])):
        client.force_login(cast[role])
        rows = client.get("/api/v1/reclaim-plans/").json()
        rows = rows["results"] if isinstance(rows, dict) else rows
        assert [row["id"] for row in rows] == listed, role
    client.force_login(cast["outsider"])
    assert client.get(f"/api/v1/reclaim-plans/{plan.pk}/").status_code == 404
