"""The enforcement round (services/enforcement/rounds.py, ``manage.py governance --once``) against real daemons: the
portal's saved shares and approved grants reach Slurm's associations in one round, and on Kubernetes the round
creates the ResourceQuotas and Volcano Queues and turns a hand edit into a drift finding it does not overwrite.

Own ports and state: Slurm at the defaults + 14000 (tests/governance_live/conftest.py, ``enforced_fleet``), with
accounting databases govsync_slurm_acct_*; Kubernetes through the session fixture of tests/k8s_live (its own
state dir and free ports)."""

from __future__ import annotations

import json
from decimal import Decimal
from io import StringIO

import pytest
from django.core.management import call_command
from django.utils import timezone
from kubernetes.client.exceptions import ApiException

from scheduling.collectors.slurm_accounting import SlurmAccountingWriter, sacctmgr_runner
from scheduling.models import DriftFinding, IdentityOverride, Membership, Node, Orchestrator, Queue, Team, Workload
from scheduling.services.enforcement import decisions as enforcement_decisions
from tests.support import active_grant

pytestmark = [pytest.mark.live, pytest.mark.django_db]

ROOT_ACCOUNT = "portal"


def governance_round() -> dict:
    out = StringIO()
    call_command("governance", "--once", "--json", stdout=out)
    return json.loads(out.getvalue())


@pytest.fixture
def portal_teams(django_user_model):
    """research 40 / production 60, as an admin saves them on the fair-share page; alice and bob members."""
    admin = django_user_model.objects.create_user("ada", is_staff=True)
    teams = {slug: Team.objects.create(slug=slug, name=slug.title()) for slug in ("research", "production")}
    for name, team in (("alice", "research"), ("bob", "production")):
        Membership.objects.create(user=django_user_model.objects.create_user(name), team=teams[team])
    for slug, weight, guaranteed, burst in (("research", 40, 4, 8), ("production", 60, 8, 32)):
        queue = Queue(team=teams[slug], weight=Decimal(weight), guaranteed=guaranteed, burst_limit=burst)
        queue._history_user, queue._change_reason = admin, f"{slug} {weight} %"
        queue.save()
    return teams, admin


# ------------------------------------------------------------------------------------------------ Slurm


def slurm_orchestrator(fleet, members: tuple[str, ...] = ("alice", "bob")) -> Orchestrator:
    """The fleet as an auto-mode orchestrator; the members submit as root there (identity overrides)."""
    options = {
        "slurm_conf": fleet.env["SLURM_CONF"],
        "governance": {
            "mode": "auto",
            "cluster": "gpuportal",
            "root_account": ROOT_ACCOUNT,
            "sacctmgr": fleet.sacctmgr_prefix()[0],
        },
    }
    orchestrator = Orchestrator.objects.create(name="hpc", kind="slurm", endpoint=fleet.url, options=options)
    for member in Membership.objects.filter(user__username__in=members).select_related("user"):
        IdentityOverride.objects.create(user=member.user, orchestrator=orchestrator, kind="slurm_user", name="root")
    return orchestrator


def slurm_accounts(fleet) -> dict:
    writer = SlurmAccountingWriter(sacctmgr_runner(fleet.sacctmgr_prefix(), fleet.env), "gpuportal")
    return {a.name: a for a in writer.read()[0]}


def normalised_shares(fleet) -> dict[str, float]:
    out = fleet.run("sshare", "-n", "-P", "-A", "research,production", "--format=Account,User,NormShares")
    return {a.strip(): float(n) for a, u, n in (line.split("|") for line in out.splitlines()) if not u}


def test_saved_shares_show_in_sshare_after_one_round(enforced_fleet, portal_teams):
    slurm_orchestrator(enforced_fleet)
    report = governance_round()["hpc"]
    assert report["failed"] == 0 and report["applied"] > 0, report
    assert normalised_shares(enforced_fleet) == {"research": pytest.approx(0.4), "production": pytest.approx(0.6)}
    assert governance_round()["hpc"]["applied"] == 0  # the second round finds it all enforced


def test_an_approved_grant_raises_grptres_in_one_round(enforced_fleet, portal_teams):
    teams, admin = portal_teams
    slurm_orchestrator(enforced_fleet)
    governance_round()
    assert slurm_accounts(enforced_fleet)["research"].grp_tres == (("gres/gpu", 8),)
    active_grant(teams["research"], admin, 32)
    report = governance_round()["hpc"]
    assert "slurm_account:research" in report["objects"]["applied"], report
    assert slurm_accounts(enforced_fleet)["research"].grp_tres == (("gres/gpu", 40),)


# ------------------------------------------------------------------------------------------- Kubernetes

NAMESPACES = {"vision": ["vision"], "speech": ["speech-a", "speech-b"]}  # not the fixture's nor test_governance's


def make_namespace(core, name: str) -> None:
    """As a cluster admin makes a team's namespace (found there already by a later test: fine)."""
    try:
        core.create_namespace({"metadata": {"name": name}})
    except ApiException as error:
        if error.status != 409:
            raise


@pytest.fixture
def k8s_teams(django_user_model):
    teams = {slug: Team.objects.create(slug=slug, name=slug.title()) for slug in NAMESPACES}
    Queue.objects.create(team=teams["vision"], weight=Decimal(30), guaranteed=2, burst_limit=4)
    Queue.objects.create(team=teams["speech"], weight=Decimal(70), guaranteed=4, burst_limit=12)
    return teams


def test_the_round_creates_quotas_and_volcano_queues_and_a_hand_edit_is_drift(cluster, k8s_teams, django_user_model):
    options = {
        "kubeconfig": cluster.env["K8S_PORTAL_KUBECONFIG"],
        "governance": {"mode": "auto", "namespaces": NAMESPACES},
    }
    Orchestrator.objects.create(name="k8s", kind="kubernetes", endpoint="https://127.0.0.1", options=options)
    for namespace in ("vision", "speech-a", "speech-b"):  # an explicit mapping names namespaces that exist
        make_namespace(cluster.core, namespace)
    report = governance_round()["k8s"]
    assert report["failed"] == 0 and not report["error"], report
    core, custom = cluster.core, cluster.custom
    # speech's cap of 12 is divided among its two namespaces (a quota cannot span them): 6 + 6, not 12 in each
    for ns, gpus in (("vision", 4), ("speech-a", 6), ("speech-b", 6)):
        assert core.read_namespaced_resource_quota("gpuportal-gpu", ns).spec.hard["requests.nvidia.com/gpu"] == str(
            gpus
        )
    queue = custom.get_cluster_custom_object("scheduling.volcano.sh", "v1beta1", "queues", "speech")
    assert queue["spec"]["capability"]["nvidia.com/gpu"] == "12" and queue["spec"]["weight"] >= 1

    # a kubectl edit of one quota: found in the next round, left as it is until an admin decides
    core.patch_namespaced_resource_quota(
        "gpuportal-gpu", "vision", {"spec": {"hard": {"requests.nvidia.com/gpu": "99"}}}
    )
    report = governance_round()["k8s"]
    assert report["objects"]["drifted"] == ["k8s_resource_quota:vision/gpuportal-gpu"], report
    finding = DriftFinding.objects.get(state="open")
    assert finding.fields == [{"field": "gpus", "before": 4, "after": 99}]
    assert core.read_namespaced_resource_quota("gpuportal-gpu", "vision").spec.hard["requests.nvidia.com/gpu"] == "99"

    admin = django_user_model.objects.create_user("ada", is_staff=True)
    enforcement_decisions.revert_drift(finding, by=admin, reason="nobody may raise a quota by hand")
    governance_round()
    assert core.read_namespaced_resource_quota("gpuportal-gpu", "vision").spec.hard["requests.nvidia.com/gpu"] == "4"
    assert governance_round()["k8s"]["drifted"] == 0


# ------------------------------------------------------------------------------ one fleet, one entitlement


def test_after_one_round_a_teams_caps_over_slurm_and_kubernetes_sum_to_at_most_its_fleet_cap(
    enforced_fleet, cluster, portal_teams
):
    """Slurm (this version) and the Kubernetes fixture governed together, research (burst 8 + a grant of 8)
    and production (burst 32), with work on both: one round, then the caps as the daemons hold them (sacctmgr's
    GrpTRES, the apiserver's ResourceQuotas) add up per team to at most its fleet cap, where copies gave each
    cluster the whole cap."""
    teams, admin = portal_teams
    active_grant(teams["research"], admin, 8)
    hpc = slurm_orchestrator(enforced_fleet)
    options = {"kubeconfig": cluster.env["K8S_PORTAL_KUBECONFIG"], "governance": {"mode": "auto"}}
    k8s = Orchestrator.objects.create(name="k8s", kind="kubernetes", endpoint="https://127.0.0.1", options=options)
    for orchestrator, gpus in ((hpc, 16), (k8s, 16)):  # the pools as the collectors would have found them
        for i in range(gpus // 8):
            Node.objects.create(orchestrator=orchestrator, name=f"{orchestrator.name}-{i}", gpu_total=8)
    now = timezone.now()
    for orchestrator, external_id, team, state, gpus in (
        (hpc, "1", "research", Workload.State.RUNNING, 4),
        (hpc, "2", "research", Workload.State.PENDING, 6),
        (k8s, "production/serve", "production", Workload.State.RUNNING, 8),
    ):
        Workload.objects.create(
            orchestrator=orchestrator,
            external_id=external_id,
            team=teams[team],
            state=state,
            gpus_per_member=gpus,
            submitted_at=now,
        )
    report = governance_round()
    assert not report["hpc"]["error"] and not report["k8s"]["error"], report
    grp = {name: a.grp_tres[0][1] for name, a in slurm_accounts(enforced_fleet).items() if name in teams and a.grp_tres}
    quotas = {
        ns: int(cluster.core.read_namespaced_resource_quota("gpuportal-gpu", ns).spec.hard["requests.nvidia.com/gpu"])
        for ns in ("research", "production")
    }
    for team, fleet_cap in (("research", 16), ("production", 32)):
        assert grp[team] + quotas[team] <= fleet_cap, (team, grp, quotas)
    assert grp["research"] >= 10  # 4 running + 6 pending on Slurm
    assert quotas["production"] >= 8  # what runs on Kubernetes
