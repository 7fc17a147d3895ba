"""Helpers shared by the bad-input tests: a token-authenticated API client per user of the shared cast."""

from datetime import timedelta

from django.utils import timezone
from knox.models import AuthToken
from rest_framework.test import APIClient

from scheduling.services import quota


def api_as(user) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {AuthToken.objects.create(user)[1]}")
    return client


def submitted_request(cast, teams, gpus: int = 4):
    """A request of nlp by the researcher, waiting for a lead's decision."""
    start = timezone.now() + timedelta(days=1)
    return quota.create_request(
        requester=cast["researcher"],
        team=teams["nlp"],
        gpus=gpus,
        starts_at=start,
        ends_at=start + timedelta(days=7),
        justification="ablation study",
    )
