from datetime import timedelta

import pytest
from knox.models import AuthToken
from rest_framework.test import APIClient

from scheduling.services import quota


@pytest.fixture
def api(cast):
    """An API client per role, authenticated with a real knox token (anonymous has none)."""

    def client_for(role: str) -> APIClient:
        client = APIClient()
        if role != "anonymous":
            _, token = AuthToken.objects.create(cast[role])
            client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
        return client

    return client_for


@pytest.fixture
def nlp_request(cast, teams, queues, period):
    start, end = period
    return quota.create_request(
        requester=cast["researcher"],
        team=teams["nlp"],
        gpus=4,
        starts_at=start,
        ends_at=end,
        justification="ablation study",
    )


@pytest.fixture
def iso_period(period):
    start, end = period
    return start.isoformat(), end.isoformat(), (start - timedelta(days=2)).isoformat()


@pytest.fixture
def stored_report(db):
    """A stored weekly capacity report with empty sections (the matrix checks access, not figures)."""
    from django.utils import timezone

    from scheduling.models import CapacityReport

    start = timezone.now().replace(microsecond=0) - timedelta(days=14)
    return CapacityReport.objects.create(
        period_start=start,
        period_end=start + timedelta(days=7),
        time_zone="UTC",
        status="sent",
        generated_at=timezone.now(),
        content={"period": {}, "sections": {}, "titles": {}},
    )
