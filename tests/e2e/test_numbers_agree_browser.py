"""Issue 33 item 5: one figure, one source. The GPUs each orchestrator owns read the same on the overview and on
/rebalance/, also while a node waits in an open plan (the rebalancer used to drop it from its pool)."""

import pytest

pytestmark = pytest.mark.browser

COLUMN_OF = """(table) => {
  const heads = [...table.querySelectorAll('thead th')].map(th => th.textContent.trim());
  return [heads, [...table.querySelectorAll('tbody tr')].map(tr => [...tr.children].map(c => c.textContent.trim()))];
}"""


def _column(page, table_selector: str, heading: str) -> dict[str, int]:
    heads, rows = page.locator(table_selector).evaluate(COLUMN_OF)
    index = heads.index(heading)
    return {row[0]: int(row[index].split()[0]) for row in rows if len(row) > index}


@pytest.fixture
def node_in_an_open_plan(federation):
    """A proposed plan moving one of ray-sweeps' nodes to k8s-serving, waiting for a decision."""
    from scheduling.models import Node, NodeMove, Orchestrator, RebalancePlan

    ray, k8s = Orchestrator.objects.get(name="ray-sweeps"), Orchestrator.objects.get(name="k8s-serving")
    node = Node.objects.filter(orchestrator=ray).order_by("name").first()
    plan = RebalancePlan.objects.create(dry_run=True, reason="k8s-serving below its floor")
    NodeMove.objects.create(plan=plan, node=node, source=ray, target=k8s, reason="idle node")
    return node


def test_the_overview_and_the_rebalance_page_give_each_orchestrator_the_same_gpus(session, node_in_an_open_plan):
    from scheduling.models import Node

    admin = session()
    admin.log_in("admin", "admin")
    overview = _column(admin.go("/"), "table[data-csv='overview-pools']", "GPUs")
    page = admin.go("/rebalance/")
    rebalance = _column(page, "table[data-csv='rebalance-split-now']", "Owns (GPUs)")
    ray_gpus = sum(Node.objects.filter(orchestrator__name="ray-sweeps").values_list("gpu_total", flat=True))
    assert overview["ray-sweeps"] == ray_gpus  # the node in the plan is still ray-sweeps' until it moves
    assert rebalance == overview
    assert node_in_an_open_plan.name in page.locator("#waiting-plans").inner_text()
    assert admin.errors == []


@pytest.fixture
def four_free_hosts_on_two_orchestrators(federation):
    """Every node full but four slurm-hpc (H100) and four ray-sweeps (A100) hosts, wholly free."""
    from scheduling.models import Node

    Node.objects.update(gpu_allocated=8, state=Node.State.ALLOCATED)
    for orchestrator in ("slurm-hpc", "ray-sweeps"):
        free = Node.objects.filter(orchestrator__name=orchestrator).order_by("name").values_list("pk", flat=True)[:4]
        Node.objects.filter(pk__in=list(free)).update(gpu_allocated=0, state=Node.State.IDLE)


def test_the_largest_gang_placeable_is_one_pools_and_reads_alike_on_both_pages(
    session, four_free_hosts_on_two_orchestrators
):
    """64 free GPUs on two orchestrators are no 64-GPU gang: no scheduler starts one across both."""
    admin = session()
    admin.log_in("admin", "admin")
    overview = admin.go("/").locator("#kpi-largest-gang").inner_text()
    page = admin.go("/fragmentation/")
    kpi = page.locator(".kpi", has_text="Largest gang placeable now")
    assert overview == "32 GPUs"
    assert kpi.locator(".value").inner_text() == overview
    assert "within one orchestrator and GPU model" in kpi.inner_text()
    assert admin.errors == []


@pytest.fixture
def light_demand(federation):
    """Inference runs 16 GPUs (its guarantee is 96); NLP runs 30 and has 14 pending."""
    from django.utils import timezone

    from scheduling.models import Orchestrator, Team, Workload

    Workload.objects.all().delete()
    slurm, now = Orchestrator.objects.get(name="slurm-hpc"), timezone.now()
    for team, job, gpus, state in (("inference", "serve", 16, "running"), ("nlp", "train", 30, "running"),
                                   ("nlp", "ablation", 14, "pending")):
        Workload.objects.create(
            orchestrator=slurm, external_id=job, team=Team.objects.get(slug=team), gang_size=1, gpus_per_member=gpus,
            state=state, submitted_at=now, started_at=now if state == "running" else None,
        )


def test_the_fair_share_previews_why_names_the_guarantee_and_what_still_waits(session, light_demand):
    admin = session()
    admin.log_in("admin", "admin")
    page = admin.go("/fairshare/")
    page.locator("tr[data-team='recsys'] input[name$='-burst_limit']").fill("200")
    page.wait_for_selector("#preview")
    why = {
        row.locator("th").inner_text().strip(): row.locator("td").last.inner_text()
        for row in page.locator("#preview tbody tr").all()
    }
    assert "guarantee 96 GPUs: 16 of it claimed first (its demand is 16)" in why["Inference serving"]
    assert "guaranteed 16" not in why["Inference serving"]
    assert "30 running, 14 pending (waiting for free GPUs, not for share)" in why["NLP research"]
    assert "fully served" not in " ".join(why.values())
    assert admin.errors == []
