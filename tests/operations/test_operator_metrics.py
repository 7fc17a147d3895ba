"""Operators' metrics at /metrics: HTTP and database (django-prometheus), Celery task runs and runtimes
counted by the worker's signals, the broker's queue depth, long work gone quiet; alert rules checked and
unit-tested by promtool; a Grafana dashboard whose every query names metrics /metrics really serves."""

import json
import re
import shutil
import subprocess
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone

from scheduling import tasks
from scheduling.models import TaskStat, WhatIfScenario
from scheduling.redact import remember
from scheduling.services import task_stats
from tests.support import redis_url, require, require_redis

pytestmark = pytest.mark.django_db
DEPLOY = Path(__file__).resolve().parents[2] / "deploy"


def scrape(client, settings) -> str:
    settings.METRICS_TOKEN = "probe"
    response = client.get("/metrics", HTTP_AUTHORIZATION="Bearer probe")
    assert response.status_code == 200
    return response.content.decode()


def sample(text: str, name: str, **labels) -> float | None:
    for line in text.splitlines():
        head, _, value = line.rpartition(" ")
        metric, _, rest = head.partition("{")
        if metric == name and dict(re.findall(r'(\w+)="([^"]*)"', rest)) == labels:
            return float(value)
    return None


def test_task_runs_are_counted_by_the_worker_signals_with_runtime_and_scrubbed_errors(client, settings):
    settings.CELERY_TASK_ALWAYS_EAGER = True
    secret = remember("s3cr3t-token-value")
    tasks.build_requested_report.delay(999_999)  # succeeds: nothing to build
    tasks.build_requested_report.delay(999_998)
    tasks.apply_plan_step.delay(424_242)  # fails: no such plan
    task_stats.record("scheduling.tasks.fake", "failed", 0.25, f"refused with {secret}")
    built = TaskStat.objects.get(name="scheduling.tasks.build_requested_report")
    assert (built.succeeded, built.failed) == (2, 0) and built.runtime_s_sum > 0
    assert TaskStat.objects.get(name="scheduling.tasks.apply_plan_step").failed == 1
    assert secret not in TaskStat.objects.get(name="scheduling.tasks.fake").last_error
    text = scrape(client, settings)
    task = "scheduling.tasks.build_requested_report"
    assert sample(text, "gpuportal_task_runs_total", task=task, outcome="succeeded") == 2
    assert sample(text, "gpuportal_task_runtime_seconds_count", task=task) == 2
    assert sample(text, "gpuportal_task_runs_total", task="scheduling.tasks.apply_plan_step", outcome="failed") == 1
    assert sample(text, "gpuportal_task_last_failure_timestamp_seconds", task="scheduling.tasks.fake") is not None


def test_an_unknown_outcome_is_refused_naming_it():
    with pytest.raises(ValueError, match="outcome: one of succeeded, failed, retried"):
        task_stats.record("t", "exploded", 1.0)


def test_http_and_database_metrics_sit_beside_the_portals_own(client, cast, settings):
    client.force_login(cast["researcher"])
    client.get("/quota/")
    client.logout()
    text = scrape(client, settings)
    assert re.search(r'^django_http_requests_total_by_view_transport_method_total\{.*view="quota-list"', text, re.M)
    assert re.search(r"^django_db_execute_total\{", text, re.M)
    assert "gpuportal_pool_gpus" in text


def test_work_gone_quiet_is_measured_from_its_last_sign_of_life(client, cast, settings):
    quiet_since = timezone.now() - timedelta(hours=2)
    scenario = WhatIfScenario.objects.create(name="q", inputs={}, created_by=cast["lead"], status="running")
    WhatIfScenario.objects.filter(pk=scenario.pk).update(heartbeat_at=quiet_since)
    text = scrape(client, settings)
    assert sample(text, "gpuportal_unfinished_work", kind="whatif") == 1
    assert 7190 < sample(text, "gpuportal_quietest_unfinished_work_seconds", kind="whatif") < 7300
    assert sample(text, "gpuportal_quietest_unfinished_work_seconds", kind="report") == 0


def test_the_queue_depth_is_read_from_a_real_redis_broker(client, settings):
    require_redis()
    settings.CELERY_BROKER_URL = redis_url()
    from gpuportal.celery import app

    with app.connection_for_write(url=redis_url()) as connection:
        queue = connection.SimpleQueue("celery")
        queue.clear()
        for n in range(3):
            queue.put({"n": n})
        try:
            assert sample(scrape(client, settings), "gpuportal_celery_queue_messages", queue="celery") == 3
        finally:
            queue.clear()
            queue.close()


def _promtool() -> str:
    found = shutil.which("promtool")
    require(found is not None, "needs promtool from Debian's prometheus (scripts/ci/install-prometheus.sh)")
    return found


def test_the_alert_rules_pass_promtools_check_and_their_unit_tests():
    promtool = _promtool()
    rules = DEPLOY / "prometheus"
    for argv in ([promtool, "check", "rules", "alerts.yml"], [promtool, "test", "rules", "alerts_test.yml"]):
        done = subprocess.run(argv, cwd=rules, capture_output=True, text=True, timeout=60, check=False)
        assert done.returncode == 0, done.stdout + done.stderr


def test_every_metric_the_dashboard_and_the_alerts_query_is_served(client, cast, settings):
    settings.CELERY_TASK_ALWAYS_EAGER = True
    tasks.build_requested_report.delay(1)  # one task row, so the task families have samples
    client.force_login(cast["researcher"])
    client.get("/quota/")
    client.logout()
    served = set(re.findall(r"^# TYPE (\w+) ", scrape(client, settings), re.M))  # families, sampled or not yet
    dashboard = json.loads((DEPLOY / "grafana" / "gpuportal-operations.json").read_text())
    queries = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    queries += re.findall(r"expr: (.+)", (DEPLOY / "prometheus" / "alerts.yml").read_text())
    names = {n for q in queries for n in re.findall(r"\b((?:gpuportal|django)_[a-z_]+)\b", q)}
    missing = sorted(n for n in names if not {n, re.sub(r"_(total|bucket|sum|count)$", "", n)} & served)
    assert names and missing == []
