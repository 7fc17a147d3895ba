"""Promises across GPU models and bounded periods, through the API (SQLite and PostgreSQL alike)."""

from datetime import timedelta

import pytest
from django.utils import timezone

from scheduling.models import QuotaGrant, QuotaRequest

pytestmark = pytest.mark.django_db


def _post(api, start, end, gpus, model=""):
    body = {
        "team": "nlp",
        "gpus": gpus,
        "gpu_model": model,
        "starts_at": start.isoformat(),
        "ends_at": end.isoformat(),
        "justification": "same future week",
    }
    return api("researcher").post("/api/v1/quota-requests/", body, format="json")


def _approve(api, request_id):
    return api("admin").post(f"/api/v1/quota-requests/{request_id}/approve/", {}, format="json")


def test_the_reported_case_approves_only_what_real_gpus_can_serve(api, demo_like_fleet):
    start = (timezone.now() + timedelta(days=60)).replace(hour=0, minute=0, second=0, microsecond=0)
    end = start + timedelta(days=7)
    asked = [_post(api, start, end, 33), _post(api, start, end, 128, "A100"), _post(api, start, end, 192, "H100")]
    assert [r.status_code for r in asked] == [201, 201, 201]
    outcomes = [_approve(api, r.json()["id"]) for r in asked]
    assert [r.status_code for r in outcomes] == [201, 400, 400]
    period = f"from {start:%Y-%m-%d} 00:00 to {end:%Y-%m-%d} 00:00"
    assert outcomes[1].json()["gpus"] == [
        f"128 GPUs exceed the unpromised A100 capacity of 0 GPUs between {start:%Y-%m-%d} 00:00 and "
        f"{end:%Y-%m-%d} 00:00: {period}, all promises (any-model and per-model) would be 448 on the fleet's "
        "320 GPUs (128 A100 + 192 H100), 128 short."
    ]
    assert "would be 512 on the fleet's 320 GPUs (128 A100 + 192 H100), 192 short" in outcomes[2].json()["gpus"][0]
    assert QuotaGrant.objects.count() == 1
    assert list(QuotaRequest.objects.order_by("gpus").values_list("state", flat=True)) == [
        "approved",
        "submitted",
        "submitted",
    ]


def test_an_unbounded_period_is_a_400_naming_both_fields(api, demo_like_fleet):
    response = api("researcher").post(
        "/api/v1/quota-requests/",
        {
            "team": "nlp",
            "gpus": 1,
            "starts_at": "0001-01-01T00:00:00Z",
            "ends_at": "9999-12-31T23:59:59Z",
            "justification": "for ever",
        },
        format="json",
    )
    assert response.status_code == 400
    assert response.json() == {
        "starts_at": ["The start may be at most 7 days in the past."],
        "ends_at": ["A period may last at most 366 days; this one lasts 3,652,058 days."],
    }
    assert not QuotaRequest.objects.exists()


def test_a_start_more_than_a_year_ahead_is_a_400(api, demo_like_fleet):
    start = timezone.now() + timedelta(days=400)
    response = _post(api, start, start + timedelta(days=1), 1)
    assert response.status_code == 400
    assert response.json() == {"starts_at": ["The start may be at most 366 days ahead."]}


def test_the_longest_period_is_a_setting(api, demo_like_fleet, settings):
    settings.GPUPORTAL_QUOTA_MAX_DAYS = 30
    start = timezone.now() + timedelta(days=1)
    assert _post(api, start, start + timedelta(days=30), 1).status_code == 201
    too_long = _post(api, start, start + timedelta(days=31), 1)
    assert too_long.status_code == 400 and "at most 30 days" in too_long.json()["ends_at"][0]


def test_a_request_filed_before_periods_were_bounded_cannot_be_approved(api, cast, teams, demo_like_fleet):
    legacy = QuotaRequest.objects.create(
        requester=cast["researcher"],
        team=teams["nlp"],
        gpus=1,
        starts_at=timezone.now() + timedelta(days=1),
        ends_at=timezone.now() + timedelta(days=3000),
        justification="filed when any period was accepted",
        state=QuotaRequest.State.SUBMITTED,
    )
    response = _approve(api, legacy.pk)
    assert response.status_code == 400 and "at most 366 days" in response.json()["ends_at"][0]
    assert not QuotaGrant.objects.exists()
