"""schemathesis against the live OpenAPI schema, as an admin and as a researcher: never a 5xx, and every
400 is a JSON object that names the fields at fault."""

import pytest
import schemathesis
from django.core import signals
from django.db import close_old_connections
from django.test import override_settings
from hypothesis import HealthCheck, settings
from knox.models import AuthToken

from gpuportal.wsgi import application

with override_settings(GPUPORTAL_PUBLIC_API_DOCS=True):  # read at import: no user exists yet to sign in
    schema = schemathesis.openapi.from_wsgi("/api/schema/?format=json", application)
# Logging out would revoke the token the fuzzer is using; token creation needs basic auth.
fuzzed = schema.exclude(path_regex=r"/auth/")


@pytest.fixture
def tokens(cast, queues, orchestrator):
    return {role: AuthToken.objects.create(cast[role])[1] for role in ("admin", "researcher")}


@pytest.fixture(autouse=True)
def keep_the_test_connection():
    """The raw WSGI app closes database connections when a request ends (as it should in production);
    inside a test transaction that would close the test's own connection, as Django's test client knows."""
    signals.request_started.disconnect(close_old_connections)
    signals.request_finished.disconnect(close_old_connections)
    yield
    signals.request_started.connect(close_old_connections)
    signals.request_finished.connect(close_old_connections)


@pytest.mark.django_db
@fuzzed.parametrize()
@settings(max_examples=3, deadline=None, suppress_health_check=list(HealthCheck))
def test_the_api_never_fails_with_a_server_error(case, tokens):
    for role, token in tokens.items():
        response = case.call(headers={"Authorization": f"Token {token}"})
        assert response.status_code < 500, f"{role}: {case.method} {case.formatted_path} -> {response.status_code}"
        if response.status_code == 400:
            body = response.json()
            assert isinstance(body, dict) and body, f"{role}: 400 without field errors: {response.text[:300]}"
