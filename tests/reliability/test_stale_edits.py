"""Issue 36, High 2 and 3: every edit and decision carries the version it was made on; a stale one is refused
with what changed, and two saves made on one version cannot both succeed."""

import threading
from decimal import Decimal
from html import unescape

import pytest
from django.db import connection, connections
from django.urls import reverse
from rest_framework.test import APIClient

from scheduling.models import PoolPolicy, Queue, QuotaGrant, QuotaRequest, RebalancePlan
from scheduling.services import governance, quota

from .forms import form_fields

pytestmark = pytest.mark.django_db


@pytest.fixture
def admins(cast, django_user_model, client):
    from django.test import Client

    ben = django_user_model.objects.create_user("ben", password="pw", is_staff=True, is_superuser=True)
    first, second = Client(), Client()
    first.force_login(cast["admin"])
    second.force_login(ben)
    return first, second


def _fairshare_form(page_client) -> dict[str, str]:
    return form_fields(page_client.get(reverse("fairshare")).content.decode(), form_id="fairshare-form")


def _set_row(form: dict, slug: str, weight) -> dict:
    queue = Queue.objects.get(team__slug=slug)
    index = next(k.split("-")[1] for k, v in form.items() if k.endswith("-queue") and v == str(queue.pk))
    return {**form, f"q-{index}-weight": str(weight)}


def test_a_save_from_a_page_loaded_before_another_admins_save_is_refused_and_undoes_nothing(admins, queues, fleet):
    ada, ben = admins
    bens_page = _fairshare_form(ben)  # Ben loads the editor first
    adas = {**_set_row(_fairshare_form(ada), "research", 30), "action": "save", "reason": "shrink research"}
    assert ada.post(reverse("fairshare"), adas).status_code == 302
    # Ben edits another row on his old page and saves: his research row still says 40.
    bens = {**_set_row(bens_page, "nlp", 90), "action": "save", "reason": "nlp a little less"}
    response = ben.post(reverse("fairshare"), bens)
    body = unescape(response.content.decode())
    assert response.status_code == 200  # the form again, not "Saved 2 entitlement change(s)"
    assert "research/any changed since you loaded it (your version 1, now 2)" in body
    assert "by ada" in body and "shrink research" in body and "weight 40.00 → 30.00" in body
    assert Queue.objects.get(team__slug="research").weight == Decimal(30)  # Ada's edit stands
    assert Queue.objects.get(team__slug="nlp").weight == Decimal(100)  # and Ben's whole save was refused


def test_a_save_from_a_fresh_page_still_saves(admins, queues, fleet):
    ada, _ = admins
    data = {**_set_row(_fairshare_form(ada), "research", 30), "action": "save", "reason": "shrink research"}
    assert ada.post(reverse("fairshare"), data).status_code == 302
    research = Queue.objects.get(team__slug="research")
    assert (research.weight, research.version) == (Decimal(30), 2)


@pytest.mark.django_db(transaction=True)
def test_two_saves_made_on_one_version_at_the_same_moment_cannot_both_succeed(queues, cast):
    if connection.vendor != "postgresql":
        pytest.skip("row locks need PostgreSQL (SQLite serialises whole transactions; the sequential test covers it)")
    research = queues["research"]
    barrier, outcomes = threading.Barrier(2), []

    def save(weight):
        try:
            barrier.wait(5)
            change = governance.QueueChange(research.team, "", Decimal(weight), 16, 48, seen_version=1)
            governance.apply_queue_changes([change], by=cast["admin"], reason=f"to {weight}")
            outcomes.append("saved")
        except Exception as error:
            outcomes.append(type(error).__name__)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=save, args=(w,)) for w in (30, 35)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert sorted(outcomes) == ["StaleVersion", "saved"]
    assert Queue.objects.get(pk=research.pk).version == 2


def test_two_saves_made_on_one_version_one_after_the_other_refuse_the_second(queues, cast):
    research = queues["research"]
    change = lambda w: governance.QueueChange(research.team, "", Decimal(w), 16, 48, seen_version=1)  # noqa: E731
    governance.apply_queue_changes([change(30)], by=cast["admin"], reason="first")
    with pytest.raises(governance.versions.StaleVersion, match="by ada"):
        governance.apply_queue_changes([change(35)], by=cast["admin"], reason="second")
    assert Queue.objects.get(pk=research.pk).weight == Decimal(30)


def test_the_api_gives_an_etag_and_refuses_a_stale_if_match_with_412_and_what_changed(queues, cast, fleet):
    api = APIClient()
    api.force_authenticate(cast["admin"])
    url = f"/api/v1/queues/{queues['research'].pk}/"
    etag = api.get(url)["ETag"]
    assert etag == '"1"'
    first = api.patch(url, {"weight": "30", "reason": "first"}, format="json", HTTP_IF_MATCH=etag)
    assert first.status_code == 200 and first["ETag"] == '"2"'
    stale = api.patch(url, {"weight": "35", "reason": "second"}, format="json", HTTP_IF_MATCH=etag)
    assert stale.status_code == 412
    assert "weight 40.00 → 30.00" in stale.json()["version"][0]
    assert Queue.objects.get(pk=queues["research"].pk).weight == Decimal(30)
    bad = api.patch(url, {"weight": "35", "reason": "x"}, format="json", HTTP_IF_MATCH="yesterday")
    assert bad.status_code == 400 and "If-Match" in bad.json()


# --- High 3: a decision applies only to the version of the request on the page ---


@pytest.fixture
def asked(cast, teams, period, queues, fleet):
    start, end = period
    return quota.create_request(
        requester=cast["researcher"], team=teams["nlp"], gpus=2, starts_at=start, ends_at=end, justification="ablation"
    )


def test_an_amendment_between_page_load_and_approve_refuses_the_approval(client, cast, asked):
    client.force_login(cast["nlp_lead"])
    page = client.get(reverse("quota-detail", args=[asked.pk])).content.decode()
    decision = {**form_fields(page, having="version"), "decision": "approve", "comment": "ok for 2"}
    quota.amend_request(asked.pk, by=cast["researcher"], changes={"gpus": 24}, reason="bigger sweep")
    body = unescape(client.post(reverse("quota-detail", args=[asked.pk]), decision).content.decode())
    assert f"Request #{asked.pk} changed since you loaded it" in body and "GPUs 2 → 24" in body
    asked.refresh_from_db()
    assert asked.state == QuotaRequest.State.SUBMITTED and not QuotaGrant.objects.filter(request=asked).exists()
    # The page now shows 24 and its current version: approving from it grants what was seen.
    page = client.get(reverse("quota-detail", args=[asked.pk])).content.decode()
    decision = {**form_fields(page, having="version"), "decision": "approve", "comment": "ok for 24"}
    assert client.post(reverse("quota-detail", args=[asked.pk]), decision).status_code == 302
    assert QuotaGrant.objects.get(request=asked).gpus == 24


def test_the_api_refuses_a_decision_on_an_amended_request(cast, asked):
    api = APIClient()
    api.force_authenticate(cast["nlp_lead"])
    etag = api.get(f"/api/v1/quota-requests/{asked.pk}/")["ETag"]
    quota.amend_request(asked.pk, by=cast["researcher"], changes={"gpus": 24}, reason="bigger sweep")
    approve = f"/api/v1/quota-requests/{asked.pk}/approve/"
    refused = api.post(approve, {"comment": "ok for 2"}, format="json", HTTP_IF_MATCH=etag)
    assert refused.status_code == 412 and "GPUs 2 → 24" in refused.json()["version"][0]
    body = {"comment": "no", "version": int(etag.strip('"'))}
    denied = api.post(f"/api/v1/quota-requests/{asked.pk}/deny/", body, format="json")
    assert denied.status_code == 412
    current = api.get(f"/api/v1/quota-requests/{asked.pk}/")
    assert current.json()["gpus"] == 24
    approved = api.post(approve, {"comment": "ok for 24"}, format="json", HTTP_IF_MATCH=current["ETag"])
    assert approved.status_code == 201 and approved.json()["gpus"] == 24


def test_a_plan_decided_on_an_old_page_is_refused(client, cast):
    plan = RebalancePlan.objects.create(reason="move two nodes")
    client.force_login(cast["admin"])
    page = client.get(reverse("rebalance-plan", args=[plan.pk])).content.decode()
    decision = {**form_fields(page, having="reason"), "decision": "approve", "reason": "ok"}
    plan.error = "re-proposed with other moves"
    plan.save()
    response = client.post(reverse("rebalance-plan", args=[plan.pk]), decision, follow=True)
    assert "changed since you loaded it" in unescape(response.content.decode())
    assert RebalancePlan.objects.get(pk=plan.pk).state == RebalancePlan.State.PROPOSED


def test_a_pool_policy_saved_on_an_old_page_is_refused(client, cast, orchestrator):
    policy = PoolPolicy.objects.create(
        orchestrator=orchestrator, name="day", weekdays=[1, 2, 3, 4, 5], start_time="08:00", end_time="20:00"
    )
    client.force_login(cast["admin"])
    url = reverse("rebalance-policy", args=[policy.pk])
    form = form_fields(client.get(url).content.decode(), having="seen_version")
    other = PoolPolicy.objects.get(pk=policy.pk)
    other.floor_gpus = 16
    other.save()
    mine = {"weekdays": ["1", "2"], "floor_gpus": "8", "reason": "mine", "lendable": "on", "enabled": "on"}
    data = {**form, "orchestrator": str(orchestrator.pk), **mine}
    body = unescape(client.post(url, data).content.decode())
    assert "changed since you loaded it" in body and "floor_gpus 0 → 16" in body
    assert PoolPolicy.objects.get(pk=policy.pk).floor_gpus == 16
