"""What admins are told in their inbox besides quota (issue 33 item 13): a reclaim plan waiting for approval
(once, not at every round that renews it) and a proposed rebalance plan, each linking to its page."""

import pytest
from django.urls import reverse

from scheduling.models import Notification
from scheduling.services import rebalance, reclaim
from tests.app.test_reclaim import borrowed  # noqa: F401 - the fixture
from tests.rebalance.conftest import MONDAY_9, federation, inference_floor  # noqa: F401 - the fixtures

pytestmark = pytest.mark.django_db


def test_a_reclaim_plan_waiting_is_told_to_the_admins_once(borrowed, cast, django_capture_on_commit_callbacks):  # noqa: F811
    with django_capture_on_commit_callbacks(execute=True):
        first = reclaim.reclaim_round(borrowed.pk)
    told = Notification.objects.filter(kind="reclaim")
    assert [(n.recipient.username, n.link) for n in told] == [("ada", reverse("reclaim"))]
    assert told.get().subject == f"Reclaim plan #{first.pk} waits for approval"
    assert "nlp held 0 of its 8 guaranteed GPUs" in told.get().body
    with django_capture_on_commit_callbacks(execute=True):
        second = reclaim.reclaim_round(borrowed.pk)  # supersedes the first: still the same decision waiting
    assert second.pk != first.pk and told.count() == 1


def test_a_proposed_rebalance_plan_is_told_to_the_admins(federation, inference_floor, cast):  # noqa: F811
    plan = rebalance.propose_plan(MONDAY_9).plan
    (told,) = Notification.objects.filter(kind="plan")
    assert (told.recipient, told.link) == (cast["admin"], reverse("rebalance-plan", args=[plan.pk]))
    assert told.subject == f"Rebalance plan #{plan.pk} waits for approval"
