"""Issue 30, item 2: one entitlement rule. A team whose quota is an approved, active grant, or whose only queue
names a GPU model, holds GPU quota for the webhook, the quota page's standing and the workloads' caps alike
(``selectors/entitlements.py`` over ``engine.governance_state.fleet_entitlements``, the queues and grants
governance splits). Before, the webhook and the pages read only an any-model queue with a burst limit."""

from datetime import timedelta

import pytest
from django.utils import timezone

from scheduling.engine.governance_state import GovernanceInput, GovGrant, GovQueue, GovTeam, fleet_entitlements
from scheduling.models import Orchestrator, Queue, QuotaGrant, QuotaRequest, Team
from scheduling.selectors.entitlements import team_entitlements
from scheduling.selectors.teams import teams_now
from scheduling.selectors.workloads import team_use_and_caps

from .test_admission import pod, post, review

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("admission_process")]


@pytest.fixture
def k8s(db):
    return Orchestrator.objects.create(name="k8s-a", kind="kubernetes", endpoint="https://k8s.example")


def grant(team, gpus, starts, ends, cast):
    request = QuotaRequest.objects.create(team=team, requester=cast["researcher"], gpus=gpus, starts_at=starts,
                                          ends_at=ends, justification="paper deadline",
                                          state=QuotaRequest.State.APPROVED)
    return QuotaGrant.objects.create(request=request, team=team, gpus=gpus, starts_at=starts, ends_at=ends,
                                     state=QuotaGrant.State.ACTIVE)


def admitted(client, slug):
    return post(client, review(pod(namespace=slug), namespace=slug)).json()["response"]["allowed"]


def test_a_team_whose_quota_is_an_active_grant_is_admitted_and_counted_everywhere(client, k8s, cast):
    team = Team.objects.create(slug="grantee", name="Grantee")
    now = timezone.now()
    assert admitted(client, "grantee") is False
    grant(team, 16, now - timedelta(hours=1), now + timedelta(days=2), cast)
    assert admitted(client, "grantee") is True
    standing = {row.slug: row for row in teams_now()}["grantee"]
    assert (standing.guaranteed, standing.burst_limit) == (16, 16)
    assert team_use_and_caps()[1]["grantee"] == 16.0


def test_a_grant_not_yet_started_or_already_revoked_does_not_admit(client, k8s, cast):
    team = Team.objects.create(slug="later", name="Later")
    now = timezone.now()
    grant(team, 8, now + timedelta(days=1), now + timedelta(days=3), cast)
    revoked = grant(team, 8, now - timedelta(days=1), now + timedelta(days=3), cast)
    revoked.state = QuotaGrant.State.REVOKED
    revoked.save()
    assert admitted(client, "later") is False


def test_a_team_whose_only_queue_names_a_gpu_model_is_admitted(client, k8s):
    team = Team.objects.create(slug="h100s", name="H100 team")
    Queue.objects.create(team=team, gpu_model="H100", weight=10, guaranteed=4, burst_limit=8)
    assert admitted(client, "h100s") is True
    assert team_entitlements(timezone.now())["h100s"].cap == 8


def test_a_sub_team_without_a_queue_holds_its_parents_entitlement_but_an_explicit_zero_does_not(client, k8s):
    parent = Team.objects.create(slug="lab", name="Lab")
    Queue.objects.create(team=parent, weight=10, guaranteed=0, burst_limit=16)
    Team.objects.create(slug="lab-a", name="Lab A", parent=parent)
    zero = Team.objects.create(slug="lab-b", name="Lab B", parent=parent)
    Queue.objects.create(team=zero, weight=10, guaranteed=0, burst_limit=0)
    assert admitted(client, "lab-a") is True
    assert admitted(client, "lab-b") is False


def test_the_rule_counts_the_any_model_queue_else_the_model_queues_plus_active_grants():
    data = GovernanceInput(
        teams=(GovTeam("a"), GovTeam("b"), GovTeam("c", parent="a"), GovTeam("d")),
        queues=(GovQueue("a", 50, 8, 32), GovQueue("a", 50, 4, 8, "H100"),
                GovQueue("b", 50, 2, 4, "H100"), GovQueue("b", 50, 1, 2, "A100")),
        grants=(GovGrant("a", 10, 0, 100), GovGrant("d", 5, 200, 300), GovGrant("b", 3, 0, 100, revoked=True)),
    )
    found = fleet_entitlements(data, at=50)
    assert (found["a"].guaranteed, found["a"].cap, found["a"].granted) == (18, 42, 10)
    assert (found["b"].guaranteed, found["b"].cap) == (3, 6)
    assert found["c"].cap is None and found["c"].holds_gpus is True  # the parent's applies
    assert found["d"].cap is None and found["d"].holds_gpus is False  # its grant starts later
    assert fleet_entitlements(data, at=250)["d"].holds_gpus is True
