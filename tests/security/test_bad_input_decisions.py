"""Issue 16: a decision comment over 100 characters was a 500 and the decision was lost (simple-history's
``history_change_reason`` was varchar(100)). Every decision keeps its whole comment, in the API and the pages,
and one limit bounds it everywhere."""

import pytest
from django.urls import reverse

from scheduling.api.serializers import DecisionSerializer, ReasonSerializer
from scheduling.forms import DecisionForm
from scheduling.limits import COMMENT_MAX_CHARS
from scheduling.models import QuotaGrant, QuotaRequest

from .bad_input_support import api_as, submitted_request

pytestmark = pytest.mark.django_db
LONG = "; ".join(["The cluster is needed for the ablation study"] * 30)  # 1,378 characters


def _last_reason(row) -> str:
    return row.history.order_by("-history_id").first().history_change_reason


def test_an_api_approval_with_a_long_comment_keeps_the_whole_comment(cast, teams, queues):
    request = submitted_request(cast, teams)
    response = api_as(cast["lead"]).post(
        f"/api/v1/quota-requests/{request.pk}/approve/", {"comment": LONG}, format="json"
    )
    assert response.status_code == 201, response.content[:300]
    request.refresh_from_db()
    assert request.state == QuotaRequest.State.APPROVED and request.decision_comment == LONG
    assert _last_reason(request) == LONG and _last_reason(request.grant) == LONG


def test_an_api_denial_with_a_long_comment_keeps_the_whole_comment(cast, teams, queues):
    request = submitted_request(cast, teams)
    response = api_as(cast["lead"]).post(f"/api/v1/quota-requests/{request.pk}/deny/", {"comment": LONG}, format="json")
    assert response.status_code == 200, response.content[:300]
    request.refresh_from_db()
    assert request.state == QuotaRequest.State.DENIED and request.decision_comment == LONG
    assert _last_reason(request) == LONG


def test_an_api_revocation_with_a_long_reason_keeps_the_whole_reason(cast, teams, queues):
    request = submitted_request(cast, teams)
    api_as(cast["lead"]).post(f"/api/v1/quota-requests/{request.pk}/approve/", {"comment": "ok"}, format="json")
    grant = QuotaGrant.objects.get(request=request)
    response = api_as(cast["lead"]).post(f"/api/v1/grants/{grant.pk}/revoke/", {"reason": LONG}, format="json")
    assert response.status_code == 200, response.content[:300]
    grant.refresh_from_db()
    assert grant.state == QuotaGrant.State.REVOKED and _last_reason(grant) == LONG
    assert _last_reason(grant.request) == LONG


@pytest.mark.parametrize("decision", ["approve", "deny"])
def test_a_page_decision_with_a_long_comment_keeps_the_whole_comment(client, cast, teams, queues, decision):
    request = submitted_request(cast, teams)
    client.force_login(cast["lead"])
    response = client.post(reverse("quota-detail", args=[request.pk]), {"decision": decision, "comment": LONG})
    assert response.status_code == 302, response.content[:300]
    request.refresh_from_db()
    assert request.decision_comment == LONG and _last_reason(request) == LONG


def test_a_page_revocation_with_a_long_reason_keeps_the_whole_reason(client, cast, teams, queues):
    request = submitted_request(cast, teams)
    client.force_login(cast["lead"])
    client.post(reverse("quota-detail", args=[request.pk]), {"decision": "approve", "comment": "ok"})
    response = client.post(reverse("quota-detail", args=[request.pk]), {"decision": "revoke", "comment": LONG})
    assert response.status_code == 302, response.content[:300]
    assert _last_reason(QuotaGrant.objects.get(request=request)) == LONG


def test_the_api_and_the_page_share_one_comment_limit():
    assert DecisionSerializer().fields["comment"].max_length == COMMENT_MAX_CHARS
    assert ReasonSerializer().fields["reason"].max_length == COMMENT_MAX_CHARS
    assert DecisionForm().fields["comment"].max_length == COMMENT_MAX_CHARS


def test_a_comment_over_the_limit_is_a_400_naming_the_field_and_the_limit(cast, teams, queues):
    request = submitted_request(cast, teams)
    too_long = "x" * (COMMENT_MAX_CHARS + 1)
    response = api_as(cast["lead"]).post(
        f"/api/v1/quota-requests/{request.pk}/deny/", {"comment": too_long}, format="json"
    )
    assert response.status_code == 400
    assert str(COMMENT_MAX_CHARS) in response.json()["comment"][0]
    request.refresh_from_db()
    assert request.state == QuotaRequest.State.SUBMITTED


def test_a_page_comment_over_the_limit_is_shown_as_a_field_error(client, cast, teams, queues):
    request = submitted_request(cast, teams)
    client.force_login(cast["lead"])
    response = client.post(
        reverse("quota-detail", args=[request.pk]), {"decision": "deny", "comment": "x" * (COMMENT_MAX_CHARS + 1)}
    )
    assert response.status_code == 200
    assert f"at most {COMMENT_MAX_CHARS} characters" in response.content.decode()
    request.refresh_from_db()
    assert request.state == QuotaRequest.State.SUBMITTED


def test_every_history_keeps_reasons_longer_than_100_characters_on_every_database():
    """SQLite ignores varchar lengths, so this is what keeps the SQLite run honest about PostgreSQL."""
    for model in (QuotaRequest, QuotaGrant):
        assert model.history.model._meta.get_field("history_change_reason").max_length is None


def test_a_long_audit_reason_from_any_path_is_kept_whole(cast, teams, queues):
    """Queue edits, inventory rows and rebalance decisions write the same history column."""
    response = api_as(cast["admin"]).patch(
        f"/api/v1/queues/{queues['research'].pk}/", {"weight": "40", "reason": LONG}, format="json"
    )
    assert response.status_code == 200, response.content[:300]
    assert _last_reason(queues["research"]) == LONG


@pytest.mark.parametrize("reason", ["ok\x00", "x" * (COMMENT_MAX_CHARS + 1)])
def test_a_raw_page_reason_with_a_nul_or_over_the_limit_is_refused_with_a_message(client, cast, teams, reason):
    """The rebalance decision reads its reason straight from the POST: the audit service checks it."""
    from scheduling.models import Membership, RebalancePlan

    Membership.objects.create(user=cast["admin"], team=teams["research"], role=Membership.Role.LEAD)
    plan = RebalancePlan.objects.create(reason="proposed")
    client.force_login(cast["admin"])
    response = client.post(reverse("rebalance-plan", args=[plan.pk]), {"decision": "reject", "reason": reason})
    assert response.status_code == 302
    plan.refresh_from_db()
    assert plan.state == RebalancePlan.State.PROPOSED
    page = client.get(response["Location"]).content.decode()
    assert "NUL" in page or f"at most {COMMENT_MAX_CHARS} characters" in page


def test_reverting_a_change_whose_reason_was_at_the_limit_still_works(cast, queues):
    from scheduling.services import governance, policies

    long_reason = "x" * COMMENT_MAX_CHARS
    change = governance.QueueChange(queues["research"].team, "", queues["research"].weight, 16, 40)
    governance.apply_queue_changes([change], by=cast["admin"], reason=long_reason)
    latest = queues["research"].history.order_by("-history_id").first()
    policies.revert_change(latest.history_id, by=cast["admin"])
    assert queues["research"].history.order_by("-history_id").first().history_change_reason.startswith("revert")
