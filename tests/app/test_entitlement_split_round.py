"""Each governance round splits every team's fleet entitlement over the orchestrators and writes the split
(#31 item 2): supply and demand from the last collect round, the split saved with why each share moved."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from scheduling.engine.governance_types import K8sResourceQuota, VolcanoQueue
from scheduling.models import EntitlementShare, Node, Orchestrator, Workload
from scheduling.services import entitlement_split as split_service
from scheduling.services.enforcement import rounds as enforcement_rounds
from tests.app.test_enforcement import clusters, governed  # noqa: F401 - the fake clusters fixture


def pool(orchestrator: Orchestrator, gpus: int) -> None:
    for i in range(gpus // 8):
        Node.objects.create(orchestrator=orchestrator, name=f"{orchestrator.name}-n{i}", gpu_model="H100", gpu_total=8)


def work(orchestrator, team, external_id, state, gpus):
    return Workload.objects.create(
        orchestrator=orchestrator,
        external_id=external_id,
        team=team,
        state=state,
        gang_size=1,
        gpus_per_member=gpus,
        submitted_at=timezone.now() - timedelta(minutes=5),
    )


@pytest.fixture
def three_clusters(queues, clusters):  # noqa: F811
    """The shared fleet's slurm-a (64 GPUs) and two more: hpc (Slurm, 32 GPUs) and k8s (48 GPUs)."""
    Orchestrator.objects.filter(name="slurm-a").update(options={"governance": {"mode": "auto"}})
    hpc, k8s = governed("hpc"), governed("k8s", kind="kubernetes")
    pool(hpc, 32)
    pool(k8s, 48)
    return {o.name: o for o in Orchestrator.objects.governed()}


def written_caps(clusters, team: str) -> dict[str, int]:  # noqa: F811
    caps = {}
    for name, cluster in clusters.items():
        for obj in cluster.objects.values():
            if getattr(obj, "kind", None) == "slurm_account" and obj.name == team and obj.grp_tres:
                caps[name] = obj.grp_tres[0][1]
            if isinstance(obj, K8sResourceQuota) and obj.namespace == team:
                caps[name] = caps.get(name, 0) + obj.gpus
    return caps


def test_after_one_round_a_teams_caps_over_all_orchestrators_sum_to_at_most_its_fleet_cap(
    three_clusters,
    teams,
    clusters,  # noqa: F811
):
    work(three_clusters["slurm-a"], teams["nlp"], "101", Workload.State.RUNNING, 8)
    work(three_clusters["slurm-a"], teams["nlp"], "102", Workload.State.PENDING, 8)
    enforcement_rounds.reconcile()
    for team, fleet_cap in (("research", 48), ("production", 64), ("nlp", 32)):
        caps = written_caps(clusters, team)
        assert set(caps) == {"slurm-a", "hpc", "k8s"}
        assert sum(caps.values()) <= fleet_cap  # copied, each cluster got the whole cap: 3 x
    assert written_caps(clusters, "nlp")["slurm-a"] >= 16  # 8 running + 8 pending there
    volcano = [o for o in clusters["k8s"].objects.values() if isinstance(o, VolcanoQueue)]
    assert sum(q.guarantee_gpus for q in volcano) <= 48


def test_the_split_of_each_round_is_saved_and_a_move_is_audited_with_why(three_clusters, teams, clusters):  # noqa: F811
    enforcement_rounds.reconcile()
    share = EntitlementShare.objects.get(team__slug="nlp", orchestrator__name="hpc")
    assert share.history.count() == 1 and share.reason.startswith("first split")
    enforcement_rounds.reconcile()  # nothing moved: no history row
    assert share.history.count() == 1
    work(three_clusters["hpc"], teams["nlp"], "7", Workload.State.PENDING, 24)  # a flood on hpc
    enforcement_rounds.reconcile()
    share.refresh_from_db()
    assert share.cap >= 24 and share.subtree_pending == 24
    assert share.history.count() == 2
    assert "0 running + 0 pending -> 0 running + 24 pending" in share.reason
    assert written_caps(clusters, "nlp")["hpc"] == share.cap


def test_a_dry_run_splits_but_saves_nothing(three_clusters):
    enforcement_rounds.reconcile(dry_run=True)
    assert not EntitlementShare.objects.exists()


def test_demand_is_read_per_team_and_orchestrator_and_namespace(three_clusters, teams):
    k8s = three_clusters["k8s"]
    work(k8s, teams["nlp"], "nlp/train-1", Workload.State.RUNNING, 4)
    work(k8s, teams["nlp"], "nlp/train-2", Workload.State.PENDING, 2)
    demand = {(d.team, d.orchestrator): (d.running, d.pending) for d in split_service.demand_of([k8s])}
    assert demand == {("nlp", "k8s"): (4, 2)}
    assert split_service.namespace_demand(k8s) == {"nlp": (4, 2)}
    assert {s.orchestrator: s.gpus for s in split_service.supply_of(list(three_clusters.values()))} == {
        "slurm-a": 64,
        "hpc": 32,
        "k8s": 48,
    }


def test_the_team_page_shows_its_split_per_orchestrator_beside_its_fleet_figures(
    client,
    three_clusters,
    teams,
    cast,
    clusters,  # noqa: F811
):
    work(three_clusters["slurm-a"], teams["nlp"], "101", Workload.State.RUNNING, 8)
    enforcement_rounds.reconcile()
    client.force_login(cast["researcher"])
    page = client.get(reverse("team-detail", args=["nlp"])).content.decode()
    section = page.split('id="entitlement-split"', 1)[1].split("</section>", 1)[0]
    for name in ("slurm-a", "hpc", "k8s"):
        share = EntitlementShare.objects.get(team__slug="nlp", orchestrator__name=name)
        assert f"<td>{name}</td>" in section and f"<td>{share.cap}</td>" in section
    assert "fleet cap 32" in section


def test_the_quota_page_says_why_in_use_exceeds_the_burst_limit(client, three_clusters, teams, cast, clusters):  # noqa: F811
    # nlp (burst limit 32) runs 40 GPUs: the page gives its cap now and says why 8 are above it.
    work(three_clusters["slurm-a"], teams["nlp"], "101", Workload.State.RUNNING, 40)
    enforcement_rounds.reconcile()
    client.force_login(cast["researcher"])
    page = client.get(reverse("quota-new")).content.decode()
    row = page.split('data-team="nlp"', 1)[1].split("</tr>", 1)[0]
    assert '<td class="num">32</td>' in row  # cap now: no grant, so the burst limit
    assert 'data-over="8"' in row and "reclaim takes them back" in row
