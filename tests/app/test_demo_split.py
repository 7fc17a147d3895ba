"""The demo is governed: each demo round splits every team's entitlement over the demo's simulated orchestrators
(one cell per GPU model of their nodes), so the team and quota pages show each team's share per orchestrator and
GPU model beside its fleet figures (issue 31: before, the demo's orchestrators were never split and every page
said "no governance round has split this team's entitlement yet")."""

from collections import defaultdict
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse
from django.utils import timezone

from scheduling.demo import fleet
from scheduling.models import EntitlementShare, Node
from scheduling.services import demo

pytestmark = pytest.mark.django_db

CELLS = {("slurm-hpc", "H100"), ("k8s-serving", "H100"), ("k8s-serving", "A100"), ("ray-sweeps", "A100")}
BURST = {slug: burst for slug, _name, _parent, _weight, _guaranteed, burst in fleet.TEAMS}


@pytest.fixture
def federation():
    demo.create_demo_federation()
    demo.fill_history(days=0.25, step_s=600)


def test_the_demo_history_leaves_a_split_per_orchestrator_and_gpu_model_that_keeps_its_invariants(federation):
    shares = list(EntitlementShare.objects.select_related("team", "orchestrator"))
    cells = {(s.orchestrator.name, s.gpu_model) for s in shares}
    assert cells == CELLS
    caps: dict[str, int] = defaultdict(int)
    root_guarantees: dict[tuple[str, str], int] = defaultdict(int)
    for share in shares:
        caps[share.team.slug] += share.cap or 0
        assert share.cap is None or share.cap >= share.subtree_running  # nothing capped below what runs
        if share.team.parent_id is None:
            root_guarantees[(share.orchestrator.name, share.gpu_model)] += share.guarantee
    for slug, total in caps.items():  # no grant is in force in the fixture: the fleet cap is the burst limit
        assert total <= BURST[slug] + sum(
            s.over for s in shares if s.team.slug == slug
        ), f"{slug}: caps {total} over its fleet cap {BURST[slug]}"
    supply: dict[tuple[str, str], int] = defaultdict(int)
    for orchestrator, model, gpus in Node.objects.values_list("orchestrator__name", "gpu_model", "gpu_total"):
        supply[(orchestrator, model)] += gpus
    for cell, guaranteed in root_guarantees.items():
        assert guaranteed <= supply[cell], f"guarantees {guaranteed} on {cell} exceed its {supply[cell]} GPUs"
    running = sum(s.subtree_running for s in shares if s.team.parent_id is None)
    assert running > 0  # the split read the replayed work, not an empty fleet


def test_a_live_demo_round_splits_again_from_that_rounds_work(federation):
    before = {(s.team_id, s.orchestrator_id, s.gpu_model): s.computed_at for s in EntitlementShare.objects.all()}
    demo.run_demo_round(timezone.now() + timedelta(minutes=20))
    after = {(s.team_id, s.orchestrator_id, s.gpu_model): s.computed_at for s in EntitlementShare.objects.all()}
    assert after.keys() == before.keys()
    assert any(after[key] > before[key] for key in before)  # the round read its own work and saved the split


def test_the_demo_team_page_shows_the_split_per_orchestrator_and_model_beside_the_fleet_figures(client, federation):
    client.force_login(get_user_model().objects.get(username="alice"))
    page = client.get(reverse("team-detail", args=["nlp"])).content.decode()
    section = page.split('id="entitlement-split"', 1)[1].split("</section>", 1)[0]
    assert "No governance round has split" not in section
    assert "fleet cap 192" in section  # nlp's burst limit, beside the shares
    for share in EntitlementShare.objects.filter(team__slug="nlp").select_related("orchestrator"):
        row = (
            f"<td>{share.orchestrator.name}</td><td>{share.gpu_model}</td>"
            f"<td>{share.guarantee}</td><td>{share.cap}</td>"
        )
        assert row in section, row
    assert 'id="split-simulated"' in section  # says the demo's clusters are simulated: nothing written elsewhere


def test_the_demo_quota_page_lists_each_teams_share_per_orchestrator_and_model_beside_its_cap_now(client, federation):
    client.force_login(get_user_model().objects.get(username="alice"))
    page = client.get(reverse("quota-new")).content.decode()
    row = page.split('data-team="nlp"', 1)[1].split("</tr>", 1)[0]
    assert '<td class="num">192' in row  # cap now: the burst limit (no grant in force), fleet-wide
    shares = EntitlementShare.objects.filter(team__slug="nlp").select_related("orchestrator")
    assert {(s.orchestrator.name, s.gpu_model) for s in shares} == CELLS
    for share in shares:
        assert (
            f"<li>{share.orchestrator.name} {share.gpu_model}: guarantee {share.guarantee}, cap {share.cap}</li>" in row
        )
    assert "each governance round splits it among the orchestrators" in page
