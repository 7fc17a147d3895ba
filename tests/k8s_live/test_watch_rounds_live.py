"""Rounds of a Kubernetes source run by ``manage.py watch_kubernetes`` (services/kubernetes_watch.py) against the
live API server: what they store follows the pods created and deleted, the Celery round leaves the watched
source alone while the watcher renews its mark, and takes it back (re-listing) once the watcher has stopped."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command

from scheduling.models import Orchestrator, Workload
from scheduling.services import collection, kubernetes_watch

from .conftest import seed, wait_for

pytestmark = [pytest.mark.live, pytest.mark.django_db(transaction=True)]

NS = "hpo"


@pytest.fixture
def source(cluster) -> Orchestrator:
    options = {"kubeconfig": cluster.env["K8S_PORTAL_KUBECONFIG"], "volcano": True}
    return Orchestrator.objects.create(name="k8s-watched", kind="kubernetes", endpoint="https://127.0.0.1",
                                       options=options)


def enqueued() -> list[int]:
    ids: list[int] = []
    collection.run_round(enqueue_scrape=ids.append)
    return ids


def stored_state(source: Orchestrator, name: str) -> str | None:
    row = Workload.objects.filter(orchestrator=source, external_id=f"{NS}/pod/{name}").first()
    return row.state if row else None


def test_watched_rounds_store_a_pod_created_then_deleted_and_the_celery_round_leaves_the_source_alone(
    cluster, source
):
    watching = kubernetes_watch.start_watch(source)
    try:
        assert watching.wait_synced(30)
        first = kubernetes_watch.watched_round(source, watching, interval_s=30)
        assert first.run is not None and first.run.ok, first
        assert watching.fallbacks == 0, "the round read the cache"
        assert source.pk not in enqueued(), "marked watched: the Celery round does not re-list it"

        cluster.core.create_namespaced_pod(NS, seed.pod_body(seed.Pod(NS, "stored-trial", 1, user="carol")))
        try:
            wait_for(lambda: any(p.metadata.name == "stored-trial" for p in watching.lists["pods"].items()),
                     what="the watch to bring the pod")
            kubernetes_watch.watched_round(source, watching, interval_s=30)
            assert stored_state(source, "stored-trial") in ("running", "pending")
        finally:
            cluster.core.delete_namespaced_pod("stored-trial", NS, grace_period_seconds=0)
        wait_for(lambda: not any(p.metadata.name == "stored-trial" for p in watching.lists["pods"].items()),
                 what="the watch to bring the deletion")
        kubernetes_watch.watched_round(source, watching, interval_s=30)
        assert stored_state(source, "stored-trial") in ("completed", "cancelled")
        assert Workload.objects.filter(orchestrator=source, external_id=f"{NS}/pod/stored-trial").count() == 1
    finally:
        watching.stop()
        kubernetes_watch.unmark([source])
    assert source.pk in enqueued(), "the watcher stopped: the Celery round re-lists the source again"


def test_the_command_runs_rounds_from_the_cache_and_unmarks_its_sources_when_it_stops(cluster, source):
    out = io.StringIO()
    call_command("watch_kubernetes", name=["k8s-watched"], rounds=2, interval=0.5, stdout=out)
    lines = out.getvalue().splitlines()
    assert len(lines) == 2 and all(line.startswith("k8s-watched: ") and line.endswith(", ok") for line in lines)
    assert "from the watch cache" in lines[-1]
    source.refresh_from_db()
    assert source.watched_until is None and source.runs.filter(ok=True).count() == 2
