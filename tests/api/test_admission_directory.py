"""The webhook's cheap path: teams, quota and pools read once and reused while their tables are unchanged
(PostgreSQL table generations), checked at most once per directory lifetime, so a change takes effect within one;
its decision rows written in batches off the request path, kept and bounded; and its own process, without the
pages' middleware.

The reuse needs committed data (``transactional_db``): inside pytest-django's per-test transaction the
directory is read and the decision written for every admission, which the other admission tests exercise."""

import os
import subprocess
import sys
import time

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext, override_settings

from scheduling.models import AdmissionDecision, Orchestrator, Queue, Team
from scheduling.services import table_changes
from scheduling.services.admission_log import DecisionLog, decisions
from tests.support import require_postgres

from .test_admission import patch_of, pod, pool_node, post, review

pytestmark = pytest.mark.usefixtures("admission_process")

TEAM_TABLE = Team._meta.db_table
DECISION_TABLE = AdmissionDecision._meta.db_table
LOG_TABLE = table_changes.LOG_TABLE


@pytest.fixture
def committed(transactional_db):
    require_postgres()
    table_changes.readiness.cache_clear()
    team = Team.objects.create(slug="nlp", name="NLP")
    Queue.objects.create(team=team, weight=100, guaranteed=8, burst_limit=32)
    Team.objects.create(slug="vision", name="Vision")  # no quota yet
    pool_node(Orchestrator.objects.create(name="k8s-a", kind="kubernetes", endpoint="https://k8s.example"))
    yield
    # This test's batched decisions written, and the writer thread's connection closed, before the tables are
    # emptied for the next test (and the test database dropped at the end).
    assert decisions.quiesce()


def _reads_of_teams(client, body) -> tuple[int, dict]:
    with CaptureQueriesContext(connection) as queries:
        response = post(client, body)
    return sum(f'FROM "{TEAM_TABLE}"' in q["sql"] for q in queries), response.json()["response"]


def test_a_second_admission_reuses_the_directory_and_a_new_grant_is_seen_at_once(client, committed, settings):
    settings.GPUPORTAL_ADMISSION_DIRECTORY_SECONDS = 0  # the generations asked on every admission: never stale
    assert _reads_of_teams(client, review(pod()))[0] == 1
    reads, answer = _reads_of_teams(client, review(pod()))
    assert reads == 0 and answer["allowed"] is True
    reads, answer = _reads_of_teams(client, review(pod(namespace="vision"), namespace="vision"))
    assert reads == 0 and answer["allowed"] is False  # from the directory: vision has no quota
    Queue.objects.create(team=Team.objects.get(slug="vision"), weight=100, guaranteed=0, burst_limit=16)
    reads, answer = _reads_of_teams(client, review(pod(namespace="vision"), namespace="vision"))
    assert reads == 1 and answer["allowed"] is True  # the queue table moved: read again, the grant counts


def _queries(client, body) -> tuple[list[str], dict]:
    with CaptureQueriesContext(connection) as queries:
        response = post(client, body)
    return [q["sql"] for q in queries], response.json()["response"]


def test_within_the_directory_lifetime_a_burst_asks_the_database_nothing_and_changes_count_after_it(
        client, committed, settings):
    """Issue 30, latency: the generations query was a quarter of an admission's CPU. Within one lifetime a burst
    of admissions makes no query at all; a quota or namespace-mapping change takes effect within one lifetime."""
    settings.GPUPORTAL_ADMISSION_DIRECTORY_SECONDS = 0.5
    settings.GPUPORTAL_ADMISSION_DECISION_FLUSH_SECONDS = 0  # each decision written in its request: read below
    assert _queries(client, review(pod()))[1]["allowed"] is True  # reads the directory
    vision = Team.objects.get(slug="vision")
    Queue.objects.create(team=vision, weight=100, guaranteed=0, burst_limit=16)
    Orchestrator.objects.filter(name="k8s-a").update(options={"governance": {"namespaces": {"vision": ["cv"]}}})
    for _ in range(5):
        sql, _answer = _queries(client, review(pod()))
        assert [q for q in sql if DECISION_TABLE not in q] == []  # no generations, no directory read
    time.sleep(0.6)  # one lifetime
    sql, answer = _queries(client, review(pod(namespace="vision"), namespace="vision"))
    assert any(LOG_TABLE in q for q in sql) and answer["allowed"] is True  # the new queue counts
    answer = _queries(client, review(pod(namespace="cv"), namespace="cv"))[1]
    assert answer["allowed"] is True and "vision" in AdmissionDecision.objects.filter(namespace="cv").get().team.slug


def test_decisions_are_written_in_batches_off_the_request_path_within_a_flush_interval(client, committed, settings):
    settings.GPUPORTAL_ADMISSION_DECISION_FLUSH_SECONDS = 0.1
    for index in range(20):
        body = review(pod())
        body["request"]["uid"] = f"u-{index}"
        sql, answer = _queries(client, body)
        assert answer["allowed"] is True and not [q for q in sql if DECISION_TABLE in q]  # not in the request
    deadline = time.monotonic() + 10
    while AdmissionDecision.objects.count() < 20 and time.monotonic() < deadline:
        time.sleep(0.05)
    rows = AdmissionDecision.objects.order_by("uid")
    assert rows.count() == 20 and {row.uid for row in rows} == {f"u-{i}" for i in range(20)}
    assert all(row.team.slug == "nlp" and row.patched and row.user == "alice" for row in rows)


def test_the_decision_buffer_is_bounded_it_drops_the_oldest_and_keeps_the_newest(committed, settings):
    settings.GPUPORTAL_ADMISSION_DECISION_FLUSH_SECONDS = 5  # the writer thread sleeps through the test
    settings.GPUPORTAL_ADMISSION_DECISION_BUFFER = 3
    held = DecisionLog()
    for index in range(5):
        held.record({"uid": f"d-{index}", "namespace": "nlp", "name": "p", "kind": "Pod", "allowed": True})
    assert (held.pending(), held.dropped) == (3, 2)
    assert held.flush() == 3 and held.pending() == 0
    assert sorted(AdmissionDecision.objects.values_list("uid", flat=True)) == ["d-2", "d-3", "d-4"]


def test_a_decision_whose_team_was_deleted_meanwhile_is_kept_without_it_and_holds_nothing_back(committed, settings):
    settings.GPUPORTAL_ADMISSION_DECISION_FLUSH_SECONDS = 5
    gone = Team.objects.create(slug="gone", name="Gone")
    held = DecisionLog()
    held.record({"uid": "before", "namespace": "gone", "name": "p", "kind": "Pod", "allowed": True, "team_id": gone.pk})
    gone.delete()
    held.record({"uid": "after", "namespace": "nlp", "name": "p", "kind": "Pod", "allowed": True,
                 "team_id": Team.objects.get(slug="nlp").pk})
    assert held.flush() == 2 and held.dropped == 0
    kept = dict(AdmissionDecision.objects.values_list("uid", "team__slug"))
    assert kept == {"before": None, "after": "nlp"}


def test_a_disabled_pool_is_no_longer_chosen(client, committed, settings):
    settings.GPUPORTAL_ADMISSION_DIRECTORY_SECONDS = 0  # at once (else within one lifetime: tested above)
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


@pytest.mark.parametrize(("name", "value", "rule"), [
    ("GPUPORTAL_ADMISSION_DIRECTORY_SECONDS", "-1", "between 0 and 60"),
    ("GPUPORTAL_ADMISSION_DECISION_FLUSH_SECONDS", "30", "between 0 and 10"),
    ("GPUPORTAL_ADMISSION_DECISION_BUFFER", "0", "at least 1"),
])
def test_a_bad_cache_or_batching_setting_stops_the_process_naming_it_and_the_rule(name, value, rule):
    env = {**os.environ, name: value, "DJANGO_SETTINGS_MODULE": "gpuportal.settings_admission"}
    done = subprocess.run([sys.executable, "-c", "import django; django.setup()"], env=env, capture_output=True,
                          text=True, timeout=120, check=False)
    assert done.returncode != 0 and f"{name} must be {rule}" in done.stderr
