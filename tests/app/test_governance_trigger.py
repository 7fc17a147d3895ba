"""A change the clusters must enforce asks for a governance round once it commits (services/governance_trigger.py),
and a burst of such changes makes one round (``enforcement_rounds.reconcile_requested``). Fake clusters as in
test_enforcement.py; the live path with a real worker, Slurm and Kubernetes is tests/governance_live."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from django.core.exceptions import ValidationError
from django.utils import timezone

import scheduling.tasks  # noqa: F401 - registers the task an eager publish runs
from scheduling.models import AppliedObject, DriftFinding, EnforcementRun, Orchestrator
from scheduling.services import governance_trigger, quota
from scheduling.services.enforcement import decisions as enforcement_decisions
from scheduling.services.enforcement import rounds as enforcement_rounds
from tests.app.test_enforcement import (  # noqa: F401 - the fake clusters fixture
    clusters,
    governed,
    hand_edit,
    holding_the_fleet,
)
from tests.support import set_queue

pytestmark = pytest.mark.django_db


class Broker:
    """Records what the trigger publishes; ``refuse`` makes it raise as a broker that is down."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, dict, float]] = []
        self.refuse = False

    def signature(self, name, kwargs):
        broker = self

        class Message:
            def apply_async(self, countdown):
                if broker.refuse:
                    raise ConnectionRefusedError("broker down")
                broker.sent.append((name, kwargs, countdown))

        return Message()


@pytest.fixture
def broker(monkeypatch):
    recorder = Broker()
    monkeypatch.setattr(governance_trigger, "current_app", recorder)
    return recorder


@pytest.fixture
def eager(settings):
    """Celery runs a published task at once, in this process (the message's countdown is not waited). Through
    Django's settings, as the other tests do: assigning ``app.conf.task_always_eager`` pins the value above
    the settings for the rest of the session (Celery keeps it in its changes map), so later tests that set
    ``CELERY_TASK_ALWAYS_EAGER`` were silently no longer eager."""
    settings.CELERY_TASK_ALWAYS_EAGER = True


def submitted(cast, teams, gpus=8):
    start = timezone.now() - timedelta(minutes=1)
    end = start + timedelta(days=1)
    return quota.create_request(
        requester=cast["researcher"], team=teams["nlp"], gpus=gpus, starts_at=start, ends_at=end, justification="x"
    )


def test_an_approval_enforces_the_grant_without_waiting_for_the_beat_round(
    queues,
    cast,
    teams,
    clusters,  # noqa: F811
    eager,
    django_capture_on_commit_callbacks,
):
    holding_the_fleet(governed("hpc"))
    enforcement_rounds.reconcile()
    assert clusters["hpc"].account("nlp").grp_tres == (("gres/gpu", 32),)
    request = submitted(cast, teams, gpus=8)
    with django_capture_on_commit_callbacks(execute=True):
        quota.approve_request(request.pk, by=cast["lead"])
    # the grant adds to nlp's cap and to every ancestor's (a parent's GrpTRES caps its subtree)
    assert clusters["hpc"].account("nlp").grp_tres == (("gres/gpu", 40),)
    assert clusters["hpc"].account("research").grp_tres == (("gres/gpu", 56),)
    # audited with who granted it, though the portal's activation of the grant is its latest change
    row = AppliedObject.objects.get(orchestrator__name="hpc", object_id="slurm_account:nlp")
    assert row.caused_by == cast["lead"] and f"(granted by {cast['lead'].username})" in row.cause


def test_the_round_is_asked_for_only_once_the_change_commits(
    queues, cast, teams, broker, django_capture_on_commit_callbacks
):
    request = submitted(cast, teams)
    with django_capture_on_commit_callbacks() as callbacks:
        quota.approve_request(request.pk, by=cast["lead"])
    assert broker.sent == []  # not before the commit: a worker must find the grant
    for callback in callbacks:
        callback()
    assert [(name, countdown) for name, _, countdown in broker.sent] == [(governance_trigger.TASK, 2.0)]


def test_a_refused_approval_asks_for_nothing(queues, cast, teams, broker, django_capture_on_commit_callbacks):
    request = submitted(cast, teams, gpus=500)  # more than the fleet's 64 GPUs
    with django_capture_on_commit_callbacks(execute=True), pytest.raises(ValidationError, match="gpus"):
        quota.approve_request(request.pk, by=cast["lead"])
    assert broker.sent == []


@pytest.mark.parametrize("change", ["revoke", "shares", "revert"])
def test_revocations_share_edits_and_drift_reverts_ask_for_a_round(
    change,
    queues,
    cast,
    teams,
    broker,
    clusters,  # noqa: F811
    django_capture_on_commit_callbacks,
):
    if change == "revoke":
        grant = quota.approve_request(submitted(cast, teams).pk, by=cast["lead"])
    with django_capture_on_commit_callbacks(execute=True):
        if change == "revoke":
            quota.revoke_grant(grant.pk, by=cast["admin"], reason="the project ended early")
        elif change == "shares":
            set_queue(
                teams["research"],
                weight=Decimal(30),
                guaranteed=16,
                burst_limit=48,
                by=cast["admin"],
                reason="research 30 %",
            )
        else:
            finding = _open_finding(clusters)
            enforcement_decisions.revert_drift(finding, by=cast["admin"], reason="no hand edits")
    assert [name for name, _, _ in broker.sent] == [governance_trigger.TASK]


def _open_finding(clusters):  # noqa: F811
    governed("hpc")
    enforcement_rounds.reconcile()
    hand_edit(clusters["hpc"], "research", fairshare=1)
    enforcement_rounds.reconcile()
    return DriftFinding.objects.get(state="open")


def test_a_broker_that_is_down_does_not_undo_the_approval(
    queues, cast, teams, broker, django_capture_on_commit_callbacks
):
    broker.refuse = True
    request = submitted(cast, teams)
    with django_capture_on_commit_callbacks(execute=True):
        grant = quota.approve_request(request.pk, by=cast["lead"])
    grant.refresh_from_db()
    assert grant.state == "active"  # the beat round enforces it


def test_with_nothing_governed_nothing_is_asked(queues, cast, teams, broker, django_capture_on_commit_callbacks):
    Orchestrator.objects.update(endpoint="demo://slurm-a")  # the embedded demo only
    with django_capture_on_commit_callbacks(execute=True):
        quota.approve_request(submitted(cast, teams).pk, by=cast["lead"])
    assert broker.sent == []


def test_a_burst_makes_one_round_and_a_change_after_a_round_began_makes_another(queues, clusters):  # noqa: F811
    governed("hpc")
    asked = timezone.now()
    first = enforcement_rounds.reconcile_requested(asked)
    assert first is not None and {o.orchestrator for o in first} == {"hpc", "slurm-a"}
    # the other messages of the burst were asked for before that round began: it read their changes
    assert enforcement_rounds.reconcile_requested(asked) is None
    assert enforcement_rounds.reconcile_requested(asked - timedelta(seconds=1)) is None
    assert EnforcementRun.objects.count() == 1
    later = enforcement_rounds.reconcile_requested(timezone.now())
    assert later is not None and EnforcementRun.objects.count() == 2
