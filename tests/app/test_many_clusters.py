"""Many clusters in one portal (issue 35 item 3): node names repeat across clusters, each cluster its own pool.

A node name is unique within a hardware domain (``Orchestrator.node_domain``): the shared domain ("") is the one
pool of machines the rebalancer moves between orchestrators (a name seen under another orchestrator there is a
move: same row, history, pin); another domain's dgx01 is another machine with a row of its own."""

from dataclasses import replace

import pytest
from django.core.exceptions import ValidationError
from django.urls import reverse

from scheduling.models import CollectorRun, FleetHost, LedgerFinding, Node, Orchestrator, SourceView
from scheduling.selectors.engine_inputs import engine_nodes
from scheduling.selectors.fragmentation import fragmentation_now
from scheduling.services import collection, ledger
from scheduling.services.ingest import ingest_snapshot
from tests.fleet_servers import recorded_collector, recorded_snapshot, site_names

pytestmark = pytest.mark.django_db

DGX = [f"dgx0{i}" for i in range(1, 9)]


def _register(name: str, kind: str = "slurm", domain: str | None = None, **options) -> Orchestrator:
    orchestrator, _ = collection.register_orchestrator(
        kind=kind, name=name, url=f"http://{name}.example:6820", node_domain=domain, options=options or None
    )
    return orchestrator


def test_two_clusters_of_one_kind_in_their_own_domains_keep_their_own_dgx01_to_dgx08():
    site_a, site_b = _register("slurm-a", domain="site-a"), _register("slurm-b", domain="site-b")
    for orchestrator in (site_a, site_b):
        ingest_snapshot(orchestrator, recorded_snapshot("slurm", orchestrator.name))
    # On main the second scrape took the first one's eight rows: 8 nodes, all slurm-b's.
    assert Node.objects.count() == 16
    for orchestrator in (site_a, site_b):
        owned = Node.objects.filter(orchestrator=orchestrator).order_by("name")
        assert [n.name for n in owned] == DGX and {n.domain for n in owned} == {orchestrator.node_domain}
        assert [n.key for n in owned] == [f"{name}@{orchestrator.node_domain}" for name in DGX]
    # Each round marks down only its own nodes that it no longer lists.
    ingest_snapshot(site_a, replace(recorded_snapshot("slurm", "slurm-a"), nodes=()))
    assert set(Node.objects.filter(domain="site-a").values_list("state", flat=True)) == {Node.State.DOWN}
    assert Node.State.DOWN not in set(Node.objects.filter(domain="site-b").values_list("state", flat=True))


def test_in_the_shared_domain_a_name_seen_under_another_orchestrator_is_the_same_machine_moved():
    slurm, k8s = _register("slurm-a"), _register("k8s-a", kind="kubernetes")
    ingest_snapshot(slurm, recorded_snapshot("slurm", "slurm-a"))
    dgx01 = Node.objects.get(name="dgx01")
    Node.objects.filter(pk=dgx01.pk).update(pinned=True)
    moved = recorded_snapshot("kubernetes", "k8s-a")
    ingest_snapshot(k8s, replace(moved, nodes=tuple(n for n in moved.nodes if n.name == "dgx01")))
    again = Node.objects.get(name="dgx01")
    assert again.pk == dgx01.pk and again.orchestrator == k8s and again.pinned and again.key == "dgx01"
    assert again.history.first().history_change_reason == "observed in k8s-a"
    assert Node.objects.count() == 8


def test_a_domain_that_is_not_a_slug_is_refused_naming_the_field():
    with pytest.raises(ValidationError) as refused:
        _register("slurm-a", domain="site a/1")
    assert "node_domain" in refused.value.message_dict
    assert not Orchestrator.objects.filter(name="slurm-a").exists()


@pytest.fixture
def site():
    """The issue's site: 4 Slurm, 6 Kubernetes and 3 Ray clusters, each a separate hardware domain named after it,
    each scraped once through ``collection.scrape`` from its kind's recorded answers."""
    orchestrators = [_register(name, kind=kind, domain=name) for kind, name in site_names()]
    for orchestrator in orchestrators:
        outcome = collection.scrape(orchestrator.pk, collector_for=recorded_collector)
        assert outcome.run is not None and outcome.run.ok, outcome
    return orchestrators


def test_thirteen_clusters_each_own_their_nodes_and_are_their_own_pool_for_the_engine(site):
    expected = {"slurm": 8, "kubernetes": 8, "ray": 3}
    for orchestrator in site:
        assert Node.objects.filter(orchestrator=orchestrator).count() == expected[orchestrator.kind], orchestrator
        assert CollectorRun.objects.filter(orchestrator=orchestrator, ok=True).count() == 1
    assert Node.objects.count() == 4 * 8 + 6 * 8 + 3 * 3
    nodes = engine_nodes()
    assert len({n.name for n in nodes}) == len(nodes) == Node.objects.count()  # keys never collide
    assert {n.orchestrator for n in nodes} == {o.name for o in site}  # every cluster a pool of its own
    per_pool = {o.name: sum(n.gpu_total for n in nodes if n.orchestrator == o.name) for o in site}
    stored = {o.name: sum(Node.objects.filter(orchestrator=o).values_list("gpu_total", flat=True)) for o in site}
    assert per_pool == stored


def test_the_ledger_sees_repeated_names_in_other_domains_as_other_machines(site):
    ledger.adopt_hosts(reason="first install")  # the inventory from what the 13 sources report
    ledger.evaluate()
    # 10 sources report dgx01 bare; as keys they are 10 machines, none of them owned twice.
    assert SourceView.objects.filter(name="dgx01").count() == 10
    assert FleetHost.objects.filter(name__startswith="dgx01@").count() == 10
    assert not LedgerFinding.objects.filter(kind="double_ownership", closed_at__isnull=True).exists()


def test_pages_link_each_clusters_node_to_its_own_page(site, client, cast):
    client.force_login(cast["admin"])
    now = fragmentation_now()
    assert {c.name for c in now.nodes} >= {"dgx01@slurm-1", "dgx01@k8s-6", "ray-head@ray-3"}
    # NVLink domains and switches are named per site too: two sites' same switch name is not one switch
    leaves = {n.leaf_switch for n in engine_nodes() if n.leaf_switch}
    assert leaves and all("@" in leaf for leaf in leaves)
    assert len({leaf.split("@")[1] for leaf in leaves}) > 1
    page = client.get(reverse("node-detail", args=["dgx01@k8s-6"]))
    assert page.status_code == 200
    owner = page.content.decode().split('id="node-owner">', 1)[1].split("<", 1)[0]
    assert owner.startswith("k8s-6 ")
    assert client.get(reverse("node-detail", args=["dgx01"])).status_code == 404  # none in the shared domain
    fleet = client.get(reverse("fragmentation")).content.decode()
    assert reverse("node-detail", args=["dgx05@slurm-3"]) in fleet


def test_the_api_tells_two_sites_dgx01_apart_by_domain(site, cast):
    from rest_framework.test import APIClient

    client = APIClient()
    client.force_authenticate(cast["admin"])
    both = client.get("/api/v1/nodes/", {"name": "dgx01", "page_size": 50}).json()
    assert both["count"] == 10
    assert sorted(row["domain"] for row in both["results"]) == sorted(o.name for o in site if o.kind != "ray")
    one = client.get("/api/v1/nodes/", {"name": "dgx01", "domain": "k8s-2"}).json()
    assert [(row["orchestrator"], row["domain"]) for row in one["results"]] == [("k8s-2", "k8s-2")]
    orchestrator = client.get(f"/api/v1/orchestrators/{site[0].pk}/").json()
    assert orchestrator["node_domain"] == "slurm-1"
