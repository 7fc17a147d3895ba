from decimal import Decimal

import pytest
from django.core.exceptions import ValidationError

from scheduling.models import Node, Queue
from scheduling.services import quota
from scheduling.services.governance import QueueChange, apply_queue_changes
from tests.support import set_queue

pytestmark = pytest.mark.django_db


def test_it_rejects_sibling_weights_over_100_percent_and_names_the_field(queues, teams, cast):
    with pytest.raises(ValidationError) as error:
        set_queue(teams["research"], weight=50, guaranteed=16, burst_limit=48, by=cast["admin"], reason="grow research")
    assert "weight" in error.value.message_dict
    assert "110" in error.value.message_dict["weight"][0] and "100%" in error.value.message_dict["weight"][0]
    assert Queue.objects.get(team=teams["research"]).weight == Decimal(40)


def test_it_rejects_a_guarantee_above_the_burst_limit(queues, teams, cast):
    with pytest.raises(ValidationError) as error:
        set_queue(teams["nlp"], weight=100, guaranteed=20, burst_limit=10, by=cast["admin"], reason="x")
    assert "burst limit" in error.value.message_dict["guaranteed"][0]


def test_it_rejects_negative_weights(queues, teams, cast):
    with pytest.raises(ValidationError) as error:
        set_queue(teams["nlp"], weight=-1, guaranteed=0, burst_limit=0, by=cast["admin"], reason="x")
    assert "between 0 and 100" in error.value.message_dict["weight"][0]


def test_guarantees_may_not_exceed_fleet_capacity(queues, teams, cast):
    with pytest.raises(ValidationError) as error:
        set_queue(teams["production"], weight=60, guaranteed=50, burst_limit=64, by=cast["admin"], reason="x")
    message = error.value.message_dict["guaranteed"][0]
    assert "onwards, all promises (any-model and per-model) would be 66 on the fleet's 64 GPUs" in message


def test_model_guarantees_and_any_model_guarantees_share_the_fleet(demo_like_fleet, teams, cast):
    # 287 of 320 GPUs are guaranteed to any model; the 128 A100 GPUs alone would hold an A100 guarantee of 128.
    with pytest.raises(ValidationError) as error:
        set_queue(
            teams["production"],
            gpu_model="A100",
            weight=0,
            guaranteed=128,
            burst_limit=128,
            by=cast["admin"],
            reason="a dedicated A100 pool",
        )
    message = error.value.message_dict["guaranteed"][0]
    assert "would be 415 on the fleet's 320 GPUs (128 A100 + 192 H100), 95 short" in message
    assert not Queue.objects.filter(gpu_model="A100").exists()


def test_a_guarantee_may_not_take_gpus_a_future_grant_was_promised(queues, teams, cast, period):
    start, end = period
    request = quota.create_request(
        requester=cast["researcher"], team=teams["nlp"], gpus=24, starts_at=start, ends_at=end, justification="ICML"
    )
    quota.approve_request(request.pk, by=cast["admin"])
    with pytest.raises(ValidationError) as error:
        set_queue(teams["production"], weight=60, guaranteed=25, burst_limit=64, by=cast["admin"], reason="x")
    message = error.value.message_dict["guaranteed"][0]
    assert f"from {start:%Y-%m-%d %H:%M} to {end:%Y-%m-%d %H:%M}, all promises" in message


def test_a_shortage_from_nodes_going_down_blocks_only_edits_that_deepen_it(queues, teams, fleet, cast):
    Node.objects.filter(pk__in=[n.pk for n in fleet[:4]]).update(state=Node.State.DOWN)  # 40 guaranteed on 32
    set_queue(teams["research"], weight=35, guaranteed=16, burst_limit=48, by=cast["admin"], reason="shares only")
    set_queue(teams["production"], weight=60, guaranteed=20, burst_limit=64, by=cast["admin"], reason="give back")
    with pytest.raises(ValidationError) as error:
        set_queue(teams["production"], weight=60, guaranteed=21, burst_limit=64, by=cast["admin"], reason="more")
    assert "would be 37 on the fleet's 32 GPUs (32 H100), 5 short" in error.value.message_dict["guaranteed"][0]


def test_sub_team_guarantees_stay_within_the_parents(queues, teams, cast):
    with pytest.raises(ValidationError) as error:
        set_queue(teams["nlp"], weight=100, guaranteed=20, burst_limit=32, by=cast["admin"], reason="x")
    assert "parent's 16" in error.value.message_dict["guaranteed"][0]


def test_a_batch_of_changes_is_all_or_nothing(queues, teams, cast):
    good = QueueChange(teams["research"], "", Decimal(30), 16, 48)
    bad = QueueChange(teams["production"], "", Decimal(80), 24, 64)  # 30 + 80 > 100
    with pytest.raises(ValidationError):
        apply_queue_changes([good, bad], by=cast["admin"], reason="rebalance shares")
    assert Queue.objects.get(team=teams["research"]).weight == Decimal(40)


def test_moving_shares_in_one_batch_passes_where_one_at_a_time_would_not(queues, teams, cast):
    apply_queue_changes(
        [
            QueueChange(teams["research"], "", Decimal(70), 16, 48),
            QueueChange(teams["production"], "", Decimal(30), 24, 64),
        ],
        by=cast["admin"],
        reason="research deadline",
    )
    assert Queue.objects.get(team=teams["research"]).weight == Decimal(70)


def test_every_change_is_audited_with_who_and_why(queues, teams, cast):
    set_queue(teams["research"], weight=35, guaranteed=16, burst_limit=48, by=cast["admin"], reason="quarterly review")
    latest = Queue.objects.get(team=teams["research"]).history.first()
    assert latest.history_user == cast["admin"]
    assert latest.history_change_reason == "quarterly review"
    assert latest.prev_record.weight == Decimal(40)


def test_a_change_without_a_reason_is_refused(queues, teams, cast):
    with pytest.raises(ValidationError) as error:
        set_queue(teams["research"], weight=35, guaranteed=16, burst_limit=48, by=cast["admin"], reason="  ")
    assert "reason" in error.value.message_dict


def test_the_database_refuses_a_guarantee_above_burst_even_past_the_service(queues):
    from django.db import IntegrityError, transaction

    queue = queues["nlp"]
    queue.guaranteed, queue.burst_limit = 10, 5
    with pytest.raises(IntegrityError), transaction.atomic():
        queue.save()
