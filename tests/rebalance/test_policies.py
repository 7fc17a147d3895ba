"""Pool policies: whole-calendar validation with clear errors, audited edits, the portal's time zone."""

from datetime import UTC, datetime, time

import pytest
from django.core.exceptions import ValidationError
from django.test import override_settings

from scheduling.models import PoolPolicy
from scheduling.selectors import pool_policies as policy_reads
from scheduling.services import pool_policies

pytestmark = pytest.mark.django_db


def _policy(orch, name, floor, start=8, end=20, **kw) -> PoolPolicy:
    return PoolPolicy(orchestrator=orch, name=name, weekdays=kw.pop("weekdays", [1, 2, 3, 4, 5]),
                      start_time=time(start), end_time=time(end), floor_gpus=floor, **kw)


def test_floors_that_cannot_all_hold_at_once_are_refused_naming_the_field_and_the_overlapping_rules(federation, cast):
    orchs = federation["orchs"]
    pool_policies.save_policy(_policy(orchs["slurm-hpc"], "training mornings", 40, 8, 12), by=cast["admin"],
                              reason="9 AM training flood")
    with pytest.raises(ValidationError) as refused:
        pool_policies.save_policy(_policy(orchs["k8s-serving"], "inference floor", 32), by=cast["admin"],
                                  reason="inference SLA")
    errors = refused.value.message_dict
    assert list(errors) == ["floor_gpus"]
    assert "training mornings" in errors["floor_gpus"][0] and "inference floor" in errors["floor_gpus"][0]
    assert not PoolPolicy.objects.filter(name="inference floor").exists()


def test_a_valid_policy_is_saved_with_who_and_why_in_its_history(federation, cast):
    policy = pool_policies.save_policy(_policy(federation["orchs"]["k8s-serving"], "inference floor", 32),
                                       by=cast["admin"], reason="inference SLA")
    version = policy.history.first()
    assert version.history_user == cast["admin"] and version.history_change_reason == "inference SLA"


def test_a_policy_edit_without_a_reason_is_refused(federation, cast):
    with pytest.raises(ValidationError) as refused:
        pool_policies.save_policy(_policy(federation["orchs"]["k8s-serving"], "x", 8), by=cast["admin"], reason=" ")
    assert "reason" in refused.value.message_dict


def test_deleting_a_policy_is_audited(federation, cast):
    policy = pool_policies.save_policy(_policy(federation["orchs"]["k8s-serving"], "x", 8), by=cast["admin"],
                                       reason="add")
    pool_policies.delete_policy(policy, by=cast["admin"], reason="no longer needed")
    deleted = PoolPolicy.history.filter(history_type="-").get()
    assert deleted.history_user == cast["admin"] and deleted.history_change_reason == "no longer needed"


def test_overlapping_rules_of_one_orchestrator_need_different_precedences(federation, cast):
    orch = federation["orchs"]["k8s-serving"]
    pool_policies.save_policy(_policy(orch, "day", 8), by=cast["admin"], reason="day")
    with pytest.raises(ValidationError) as refused:
        pool_policies.save_policy(_policy(orch, "lunch", 16, 11, 14), by=cast["admin"], reason="lunch peak")
    assert "precedence" in refused.value.message_dict


@override_settings(TIME_ZONE="Europe/Paris")
def test_the_calendar_is_read_in_the_portals_time_zone(federation, cast):
    pool_policies.save_policy(_policy(federation["orchs"]["k8s-serving"], "inference floor", 24), by=cast["admin"],
                              reason="SLA")
    seven_utc = datetime(2026, 11, 30, 7, 30, tzinfo=UTC)  # 08:30 in Paris: inside the 08-20 window
    assert policy_reads.local_moment(seven_utc) == (1, 8 * 60 + 30)
    assert policy_reads.bounds_now(seven_utc)["k8s-serving"].floor_gpus == 24
