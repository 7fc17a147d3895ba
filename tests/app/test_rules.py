import pytest

from scheduling.services import quota

pytestmark = pytest.mark.django_db


def test_roles_see_and_decide_what_they_should(cast, teams, queues, period):
    start, end = period
    request = quota.create_request(
        requester=cast["researcher"], team=teams["nlp"], gpus=2, starts_at=start, ends_at=end, justification="ablation"
    )
    can = lambda who, perm, obj: cast[who].has_perm(f"scheduling.{perm}", obj)  # noqa: E731
    assert can("researcher", "view_quota_request", request)
    assert can("lead", "view_quota_request", request)
    assert can("admin", "view_quota_request", request)
    assert not can("outsider", "view_quota_request", request)
    assert can("lead", "decide_quota_request", request)
    assert not can("researcher", "decide_quota_request", request)
    assert not can("outsider", "decide_quota_request", request)


def test_only_admins_edit_governance(cast):
    for perm in ("edit_entitlements", "edit_pool_policies", "edit_orchestrators"):
        assert cast["admin"].has_perm(f"scheduling.{perm}")
        for who in ("researcher", "lead", "outsider"):
            assert not cast[who].has_perm(f"scheduling.{perm}")


def test_a_sub_team_member_sees_the_sub_team_but_not_a_sibling(cast, teams):
    assert cast["researcher"].has_perm("scheduling.see_team", teams["nlp"])
    assert not cast["researcher"].has_perm("scheduling.see_team", teams["production"])
    assert cast["lead"].has_perm("scheduling.see_team", teams["nlp"])
