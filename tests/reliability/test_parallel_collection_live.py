"""Many clusters collected in parallel by a real Celery worker (issue 35 item 3): each orchestrator's scrape is its
own task with its own time limits, so a cluster that stops answering marks only itself stale while the others'
rounds commit. Real PostgreSQL, Redis and a prefork `celery worker` (skipped with a reason outside CI)."""

import time
from datetime import timedelta
from pathlib import Path

import pytest
from django.conf import settings
from django.utils import timezone

from scheduling.models import CollectorRun, Node, Orchestrator
from scheduling.services import collection
from tests.app.test_services_live import celery_worker
from tests.fleet_servers import hanging_server, ray_dashboard
from tests.support import redis_url, require_redis

pytestmark = [pytest.mark.services, pytest.mark.django_db(transaction=True)]

KUBECONFIG = """apiVersion: v1
kind: Config
clusters: [{{name: hung, cluster: {{server: "{server}"}}}}]
users: [{{name: portal, user: {{token: not-a-secret}}}}]
contexts: [{{name: hung, context: {{cluster: hung, user: portal}}}}]
current-context: hung
"""


@pytest.fixture
def credentials_dir(tmp_path, settings):
    settings.GPUPORTAL_CREDENTIALS_DIRS = [str(tmp_path)]
    return tmp_path


@pytest.fixture
def collector_worker(credentials_dir, monkeypatch):
    """A prefork worker of 3 processes on the default and the collect queues, as `rundemo`'s collector runs."""
    require_redis()
    from celery import Celery

    queues = f"celery,{settings.GPUPORTAL_COLLECT_QUEUE}"
    env = {"GPUPORTAL_CREDENTIALS_DIRS": str(credentials_dir)}
    pool = ("--pool=prefork", "--concurrency=3", "-Q", queues)
    with celery_worker(redis_url(), redis_url(), pool=pool, env=env):
        monkeypatch.setenv("CELERY_BROKER_URL", redis_url())
        monkeypatch.setenv("CELERY_RESULT_BACKEND", redis_url())
        producer = Celery("collect-probe", broker=redis_url(), backend=redis_url(), set_as_current=False)
        producer.control.purge()  # a killed earlier run's messages would be scraped first
        yield producer
        producer.close()


def _register(name: str, kind: str, url: str, **options) -> Orchestrator:
    return collection.register_orchestrator(kind=kind, name=name, url=url, node_domain=name, options=options)[0]


def _until_every_source_has_a_run(orchestrators: list[Orchestrator]) -> dict[str, CollectorRun]:
    """Each orchestrator's first scrape once all have one (bounded polling, never a timing assertion)."""
    for _ in range(900):
        runs = {o.name: CollectorRun.objects.filter(orchestrator=o).order_by("pk").first() for o in orchestrators}
        if all(runs.values()):
            return runs  # type: ignore[return-value]
        time.sleep(0.2)
    raise AssertionError(f"no scrape recorded for {[name for name, run in runs.items() if run is None]}")


def test_a_hung_cluster_is_cut_at_its_own_limit_while_the_others_commit(collector_worker, credentials_dir):
    with ray_dashboard() as dashboard, hanging_server() as hung:
        kubeconfig = Path(credentials_dir) / "hung.kubeconfig"
        kubeconfig.write_text(KUBECONFIG.format(server=hung))
        # The Kubernetes client's own timeout (10 min) would hold a slot; only the cluster's 20 s limit ends it.
        k8s_hung = _register("k8s-hung", "kubernetes", hung, kubeconfig=str(kubeconfig), timeout_s=600,
                             scrape_time_limit_s=20)
        ray_hung = _register("ray-hung", "ray", hung, timeout_s=600, scrape_time_limit_s=20)
        good = [_register(f"ray-{i}", "ray", dashboard) for i in range(1, 6)]
        sent_at = timezone.now()
        collector_worker.send_task("scheduling.tasks.run_round").get(timeout=120)
        runs = _until_every_source_has_a_run([k8s_hung, ray_hung, *good])
    k8s_run, ray_run = runs.pop("k8s-hung"), runs.pop("ray-hung")
    # The Kubernetes client is not httpx: Celery's soft limit of this cluster (not the 120 s default) stopped it.
    assert not k8s_run.ok and "time limit of 13 s" in k8s_run.error
    # ... long before the default soft limit (120 s) would have (a bound, not a speed: the limit is the behaviour)
    assert k8s_run.started_at - sent_at < timedelta(seconds=settings.GPUPORTAL_TASK_TIME_LIMITS["scrape"] - 60) / 2
    # The Ray dashboard is httpx: the cluster's own deadline (3/4 of its soft limit) ended its calls first.
    assert not ray_run.ok and "deadline of 9.75 s" in ray_run.error
    for hung_source in (k8s_hung, ray_hung):
        hung_source.refresh_from_db()
        assert hung_source.is_stale and hung_source.lease_token == ""
    for name, run in runs.items():
        assert run.ok and run.nodes == 3, name
        # committed while the hung clusters' scrapes were still in flight
        assert run.started_at < k8s_run.started_at, name
    assert Node.objects.filter(name="ray-head").count() == 5  # five sites' heads, five rows
