"""Ingested workloads carry their portal user: the default (same name), an admin's override, and nobody; Slurm
governance reads its cluster users from the same overrides."""

from datetime import UTC, datetime

import pytest
from django.urls import reverse

from scheduling.collectors.snapshot import ObservedWorkload, Snapshot, WorkloadState
from scheduling.engine.owners import Claim, NameKind, kubernetes_claims
from scheduling.engine.types import OrchestratorKind
from scheduling.models import IdentityOverride, Orchestrator, Workload
from scheduling.services.enforcement import intent as enforcement_intent
from scheduling.services.ingest import ingest_snapshot

pytestmark = pytest.mark.django_db
T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def observed(job_id, claims, orchestrator="slurm-a"):
    return ObservedWorkload(
        external_id=job_id, orchestrator=orchestrator, team="nlp", state=WorkloadState.PENDING, gpus_per_member=8,
        submitted_at=T0.timestamp(), user=claims[0].name if claims else "", claims=tuple(claims),
    )


def ingest(orchestrator, *workloads, kind=OrchestratorKind.SLURM):
    ingest_snapshot(orchestrator, Snapshot(orchestrator.name, kind, T0, (), tuple(workloads)))
    return {w.external_id: (w.user, w.cluster_user) for w in Workload.objects.filter(orchestrator=orchestrator)}


def slurm(name):
    return Claim(NameKind.SLURM_USER, name)


def test_a_slurm_user_named_like_a_portal_user_is_theirs_and_others_are_nobodys(orchestrator, teams, cast):
    owners = ingest(orchestrator, observed("1", [slurm("rita")]), observed("2", [slurm("root")]), observed("3", []))
    assert owners == {"1": ("rita", "rita"), "2": ("", "root"), "3": ("", "")}


def test_an_override_maps_a_cluster_user_and_the_next_round_follows_a_change(orchestrator, teams, cast):
    override = IdentityOverride.objects.create(
        user=cast["researcher"], orchestrator=orchestrator, kind="slurm_user", name="root"
    )
    assert ingest(orchestrator, observed("2", [slurm("root")]))["2"] == ("rita", "root")
    override.user = cast["lead"]
    override.save()
    assert ingest(orchestrator, observed("2", [slurm("root")]))["2"] == ("leo", "root")


def test_a_pod_maps_by_label_then_service_account_then_namespace(teams, cast):
    k8s = Orchestrator.objects.create(name="k8s", kind="kubernetes", endpoint="https://k8s.example")
    IdentityOverride.objects.create(user=cast["lead"], orchestrator=k8s, kind="kubernetes_service_account",
                                    name="nlp/trainer")
    IdentityOverride.objects.create(user=cast["admin"], kind="kubernetes_namespace", name="nlp")
    pods = [
        observed("labelled", kubernetes_claims({"gpuportal.io/user": "rita"}, "nlp", "trainer"), "k8s"),
        observed("by-account", kubernetes_claims({}, "nlp", "trainer"), "k8s"),
        observed("by-namespace", kubernetes_claims({}, "nlp", "default"), "k8s"),
    ]
    owners = ingest(k8s, *pods, kind=OrchestratorKind.KUBERNETES)
    assert owners == {
        "labelled": ("rita", "rita"), "by-account": ("leo", "nlp/trainer"), "by-namespace": ("ada", "nlp/default")
    }


def test_a_mapped_workload_shows_in_its_owners_my_workloads_with_the_cluster_name(client, orchestrator, teams, cast):
    IdentityOverride.objects.create(user=cast["researcher"], orchestrator=orchestrator, kind="slurm_user", name="rs01")
    ingest(orchestrator, observed("77", [slurm("rs01")]))
    client.force_login(cast["researcher"])
    body = client.get(reverse("my-workloads")).content.decode()
    assert "slurm-a:77" in body and "as rs01" in body
    client.force_login(cast["lead"])
    assert "slurm-a:77" not in client.get(reverse("my-workloads")).content.decode()


def test_slurm_governance_creates_associations_under_the_overridden_cluster_user(orchestrator, cast):
    IdentityOverride.objects.create(user=cast["researcher"], orchestrator=orchestrator, kind="slurm_user", name="rs01")
    IdentityOverride.objects.create(user=cast["lead"], kind="slurm_user", name="shared")
    IdentityOverride.objects.create(user=cast["lead"], kind="ray_submitter", name="Leo")
    assert enforcement_intent.gov_orchestrator(orchestrator).user_overrides == {"rita": "rs01", "leo": "shared"}


def test_an_override_written_around_the_checks_is_left_out_not_fatal_to_the_round(orchestrator, teams, cast, caplog):
    IdentityOverride.objects.create(user=cast["researcher"], kind="slurm_user", name="not a slurm name")
    assert ingest(orchestrator, observed("1", [slurm("leo")]))["1"] == ("leo", "leo")
    assert "identity overrides left out" in caplog.text
