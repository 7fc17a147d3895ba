"""Governance rounds against real Slurm (22.05 with slurmdbd, ``rounds_fleet``: ports 19617-19632) and the session's
real kube-apiserver (tests/k8s_live):

- an approval alone, through services/quota, reaches Slurm's association and the namespace's ResourceQuota: the
  approval asks for a round once it commits and a real Celery worker runs it (no beat, no round called here);
- a round with Kubernetes unreachable applies Slurm, records Kubernetes' error and keeps its changes pending,
  records nothing of Kubernetes as applied, shows both on the governance page; the next round, with Kubernetes
  back, applies the rest;
- a namespace mapping naming a namespace missing from the cluster stops the Kubernetes round before any write,
  naming the field; fixed, the next round applies.

Kubernetes is made unreachable by cutting a TCP relay (tests/governance_live/outage.py, port 19650) between the
portal and the session's apiserver, which other tests share and which keeps running."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import yaml
from django.conf import settings
from django.contrib.auth import get_user_model
from django.urls import reverse
from django.utils import timezone
from kubernetes.client.exceptions import ApiException

from gpuportal.celery import app as celery_app
from scheduling.models import AppliedObject, EnforcementRun, Membership, Node, Orchestrator, Queue, Team
from scheduling.services import quota
from tests.app.test_services_live import celery_worker
from tests.governance_live.outage import Relay
from tests.governance_live.test_enforcement_live import (
    governance_round,
    make_namespace,
    slurm_accounts,
    slurm_orchestrator,
)
from tests.k8s_live.conftest import wait_for

pytestmark = [pytest.mark.live]
RELAY_PORT = 19650
QUOTA = "gpuportal-gpu"


def federation(fleet, kubeconfig: str, slugs: tuple[str, str], namespaces: dict | None = None):
    """Two teams (guaranteed 4 / 8, burst 8 / 16), alice in the first, an admin, 64 H100 behind each of the
    Slurm and Kubernetes orchestrators (what approvals check capacity against, and what the split shares each
    team's fleet cap by); Slurm and Kubernetes governed in auto mode, each team
    in a namespace named after it (made by the portal) unless ``namespaces`` maps them."""
    users = get_user_model().objects
    admin = users.create_user(f"ada-{slugs[0]}", is_staff=True, is_superuser=True)
    alice = users.create_user(f"alice-{slugs[0]}")
    teams = [Team.objects.create(slug=slug, name=slug.title()) for slug in slugs]
    for team, (weight, guaranteed, burst) in zip(teams, ((40, 4, 8), (60, 8, 16)), strict=True):
        Queue.objects.create(team=team, weight=Decimal(weight), guaranteed=guaranteed, burst_limit=burst)
    Membership.objects.create(user=alice, team=teams[0])
    hpc = slurm_orchestrator(fleet, (alice.username,))
    Node.objects.bulk_create(
        Node(orchestrator=hpc, name=f"dgx{i:02d}", gpu_model="H100", gpu_total=8) for i in range(8)
    )
    k8s_options = {"kubeconfig": kubeconfig, "governance": {"mode": "auto", "namespaces": namespaces or {}}}
    k8s = Orchestrator.objects.create(name="k8s", kind="kubernetes", endpoint="https://127.0.0.1", options=k8s_options)
    # as many GPUs behind Kubernetes: the split shares each team's fleet cap between the two pools evenly
    Node.objects.bulk_create(
        Node(orchestrator=k8s, name=f"k8s{i:02d}", gpu_model="H100", gpu_total=8) for i in range(8)
    )
    return teams[0], alice, admin


def quota_gpus(core, namespace: str) -> int | None:
    try:
        return int(core.read_namespaced_resource_quota(QUOTA, namespace).spec.hard["requests.nvidia.com/gpu"])
    except ApiException as error:
        if error.status == 404:
            return None
        raise


def slurm_cap(fleet, account: str) -> int | None:
    found = slurm_accounts(fleet).get(account)
    return dict(found.grp_tres).get("gres/gpu") if found else None


# ------------------------------------------------------------------------------- approval -> enforced


@pytest.fixture
def portal_worker():
    """A real worker on the portal's own broker (what the approval publishes to), its queue emptied first so
    no message of an earlier test runs a round here."""
    celery_app.control.purge()
    with celery_worker(settings.CELERY_BROKER_URL) as process:
        yield process


@pytest.mark.django_db(transaction=True)
def test_an_approval_alone_enforces_the_grant_on_slurm_and_kubernetes(portal_worker, rounds_fleet, cluster):
    team, alice, admin = federation(rounds_fleet, cluster.env["K8S_PORTAL_KUBECONFIG"], ("atlas", "borealis"))
    governance_round()  # the standing state, before the approval
    # atlas's fleet cap of 8 split over the two clusters (equal pools, no work: evenly), not 8 on each
    assert (slurm_cap(rounds_fleet, "atlas"), quota_gpus(cluster.core, "atlas")) == (4, 4)
    start = timezone.now() - timedelta(minutes=1)
    request = quota.create_request(
        requester=alice, team=team, gpus=4, starts_at=start, ends_at=start + timedelta(days=1), justification="run"
    )
    approved_at = timezone.now()
    quota.approve_request(request.pk, by=admin)  # commits; nothing else is called here

    def enforced():
        return (slurm_cap(rounds_fleet, "atlas"), quota_gpus(cluster.core, "atlas")) == (6, 6)  # 8 + 4 granted

    wait_for(enforced, timeout=180, what="the worker's round to raise atlas's caps to 6 + 6")
    triggered = EnforcementRun.objects.filter(started_at__gte=approved_at)
    # the clusters hold the caps before the round has recorded its last orchestrator: wait for its end
    wait_for(lambda: triggered.filter(finished_at__isnull=False).exists(), timeout=60, what="the round's end")
    assert triggered.count() == 1  # one approval, one round
    outcomes = {o.orchestrator.name: o for o in triggered.get().outcomes.all()}
    assert outcomes["hpc"].applied >= 1 and outcomes["k8s"].applied >= 1
    assert not outcomes["hpc"].error and not outcomes["k8s"].error
    audit = AppliedObject.objects.get(orchestrator__name="hpc", object_id="slurm_account:atlas")
    assert "grant of atlas" in audit.cause and audit.caused_by == admin  # the change that caused it, and who


# ------------------------------------------------------------------------------------- partial apply


@pytest.fixture
def relay(cluster, tmp_path):
    """The portal reaches the apiserver through a relay on RELAY_PORT (its own kubeconfig copy)."""
    config = yaml.safe_load(Path(cluster.env["K8S_PORTAL_KUBECONFIG"]).read_text())
    server = urlsplit(config["clusters"][0]["cluster"]["server"])
    config["clusters"][0]["cluster"]["server"] = f"https://127.0.0.1:{RELAY_PORT}"
    path = tmp_path / "portal-via-relay.kubeconfig"
    path.write_text(yaml.safe_dump(config))
    relay = Relay(RELAY_PORT, (server.hostname, server.port))
    relay.start()
    relay.kubeconfig = str(path)
    yield relay
    relay.cut()


@pytest.mark.django_db
def test_a_round_with_kubernetes_unreachable_applies_slurm_then_the_next_applies_kubernetes(
    rounds_fleet,
    cluster,
    relay,
    client,
):
    federation(rounds_fleet, relay.kubeconfig, ("cygnus", "draco"))
    relay.cut()
    report = governance_round()
    hpc, k8s = report["hpc"], report["k8s"]
    assert not hpc["error"] and hpc["failed"] == 0 and "slurm_account:cygnus" in hpc["objects"]["applied"], hpc
    assert slurm_cap(rounds_fleet, "cygnus") == 4  # its share: the fleet cap of 8 split over both clusters
    assert k8s["error"] and k8s["applied"] == 0, k8s
    assert f"k8s_resource_quota:cygnus/{QUOTA}" in k8s["objects"]["pending"], k8s
    # nothing of Kubernetes is recorded as applied, and nothing reached it
    assert not AppliedObject.objects.filter(orchestrator__name="k8s").exists()
    assert AppliedObject.objects.filter(orchestrator__name="hpc", object_id="slurm_account:cygnus").exists()
    assert quota_gpus(cluster.core, "cygnus") is None

    client.force_login(get_user_model().objects.get(username="ada-cygnus"))
    page = client.get(reverse("governance")).content.decode()
    rows = {name: page.split(f"<td>{name}</td>", 1)[1].split("</tr>", 1)[0] for name in ("hpc", "k8s")}
    assert 'class="error"' in rows["k8s"] and 'class="error"' not in rows["hpc"]

    relay.start()
    report = governance_round()
    assert not report["k8s"]["error"] and report["k8s"]["failed"] == 0, report["k8s"]
    assert f"k8s_resource_quota:cygnus/{QUOTA}" in report["k8s"]["objects"]["applied"]
    assert report["hpc"]["applied"] == 0  # Slurm was done in the first round
    # their shares: half of the fleet caps 8 and 16 (the other half is Slurm's)
    assert (quota_gpus(cluster.core, "cygnus"), quota_gpus(cluster.core, "draco")) == (4, 8)


# ----------------------------------------------------------------------------------------- bad mapping


@pytest.mark.django_db
def test_a_mapping_naming_a_missing_namespace_stops_the_kubernetes_round_before_any_write(rounds_fleet, cluster):
    mapping = {"eridanus": ["eridanus-trian"]}  # a typo of eridanus-train, which the cluster admin made
    make_namespace(cluster.core, "eridanus-train")
    federation(rounds_fleet, cluster.env["K8S_PORTAL_KUBECONFIG"], ("eridanus", "fornax"), mapping)
    report = governance_round()
    k8s = report["k8s"]
    assert "options.governance.namespaces.eridanus: namespace 'eridanus-trian' does not exist" in k8s["error"], k8s
    assert k8s["applied"] == 0 and not AppliedObject.objects.filter(orchestrator__name="k8s").exists()
    # nothing written: not the typo'd namespace, not the other team's, no quota
    assert not namespace_exists(cluster.core, "eridanus-trian") and not namespace_exists(cluster.core, "fornax")
    assert quota_gpus(cluster.core, "eridanus-train") is None
    assert not report["hpc"]["error"]  # Slurm proceeds

    k8s_row = Orchestrator.objects.get(name="k8s")
    k8s_row.options["governance"]["namespaces"] = {"eridanus": ["eridanus-train"]}
    k8s_row.save()
    report = governance_round()["k8s"]
    assert not report["error"] and report["failed"] == 0, report
    # their shares on Kubernetes: half of the fleet caps of 8 and 16 (the other half is Slurm's)
    assert (quota_gpus(cluster.core, "eridanus-train"), quota_gpus(cluster.core, "fornax")) == (4, 8)


def namespace_exists(core, name: str) -> bool:
    try:
        core.read_namespace(name)
    except ApiException as error:
        if error.status == 404:
            return False
        raise
    return True
