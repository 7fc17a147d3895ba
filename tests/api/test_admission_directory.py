"""The webhook's cheap path: teams, quota and pools read once and reused while their tables are unchanged
(PostgreSQL table generations), never stale; and its own process, without the pages' middleware.

The reuse needs committed data (``transactional_db``): inside pytest-django's per-test transaction the
directory is read for every admission, which the other admission tests exercise."""


import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext, override_settings

from scheduling.models import AdmissionDecision, Orchestrator, Queue, Team
from scheduling.services import table_changes
from tests.support import require_postgres

from .test_admission import patch_of, pod, pool_node, post, review

pytestmark = pytest.mark.usefixtures("admission_process")

TEAM_TABLE = Team._meta.db_table


@pytest.fixture
def committed(transactional_db):
    require_postgres()
    table_changes.readiness.cache_clear()
    team = Team.objects.create(slug="nlp", name="NLP")
    Queue.objects.create(team=team, weight=100, guaranteed=8, burst_limit=32)
    Team.objects.create(slug="vision", name="Vision")  # no quota yet
    pool_node(Orchestrator.objects.create(name="k8s-a", kind="kubernetes", endpoint="https://k8s.example"))
    yield


def _reads_of_teams(client, body) -> tuple[int, dict]:
    with CaptureQueriesContext(connection) as queries:
        response = post(client, body)
    return sum(f'FROM "{TEAM_TABLE}"' in q["sql"] for q in queries), response.json()["response"]


def test_a_second_admission_reuses_the_directory_and_a_new_grant_is_seen_at_once(client, committed):
    assert _reads_of_teams(client, review(pod()))[0] == 1
    reads, answer = _reads_of_teams(client, review(pod()))
    assert reads == 0 and answer["allowed"] is True
    reads, answer = _reads_of_teams(client, review(pod(namespace="vision"), namespace="vision"))
    assert reads == 0 and answer["allowed"] is False  # from the directory: vision has no quota
    Queue.objects.create(team=Team.objects.get(slug="vision"), weight=100, guaranteed=0, burst_limit=16)
    reads, answer = _reads_of_teams(client, review(pod(namespace="vision"), namespace="vision"))
    assert reads == 1 and answer["allowed"] is True  # the queue table moved: read again, the grant counts


def test_a_disabled_pool_is_no_longer_chosen(client, committed):
    pool_node(Orchestrator.objects.create(name="k8s-0", kind="kubernetes", endpoint="https://k8s0.example"), "n0")
    assert patch_of(post(client, review(pod())))["/spec/nodeSelector"] == {"gpuportal.io/pool": "k8s-0"}
    Orchestrator.objects.filter(name="k8s-0").update(enabled=False)
    assert patch_of(post(client, review(pod())))["/spec/nodeSelector"] == {"gpuportal.io/pool": "k8s-a"}


@override_settings(ROOT_URLCONF="gpuportal.urls_admission", MIDDLEWARE=[
    "django_prometheus.middleware.PrometheusBeforeMiddleware", "django.middleware.security.SecurityMiddleware",
    "django_prometheus.middleware.PrometheusAfterMiddleware"])
def test_the_admission_process_serves_the_webhook_and_health_and_no_page(client, queues):
    from gpuportal import settings_admission

    assert settings_admission.MIDDLEWARE == [  # the override above is the module's own list
        "django_prometheus.middleware.PrometheusBeforeMiddleware", "django.middleware.security.SecurityMiddleware",
        "django_prometheus.middleware.PrometheusAfterMiddleware"]
    Orchestrator.objects.create(name="k8s-a", kind="kubernetes", endpoint="https://k8s.example")
    response = post(client, review(pod()))
    assert response.status_code == 200 and patch_of(response)["/spec/schedulerName"] == "volcano"
    assert AdmissionDecision.objects.get().user == "alice"
    assert client.get("/health").status_code in (200, 503)
    assert client.get("/").status_code == 404 and client.get("/api/v1/teams/").status_code == 404
