"""Governance enforced through a round (services/enforcement/rounds.py) against fake clusters: the intent built from the
ORM, auto and review modes, drift findings decided by an admin, a failing orchestrator, and the audit rows."""

from __future__ import annotations

import json
from datetime import timedelta
from decimal import Decimal
from io import StringIO

import pytest
from django.core.exceptions import ValidationError
from django.core.management import call_command
from django.urls import reverse
from django.utils import timezone

from scheduling.collectors import SourceUnavailable
from scheduling.collectors.governance_apply import ApplyResult
from scheduling.collectors.governance_clusters import KubernetesCluster
from scheduling.engine.governance_state import Action, object_id
from scheduling.engine.governance_types import SlurmAccount
from scheduling.models import (
    AppliedObject,
    DriftFinding,
    EnforcementOutcome,
    EnforcementPlan,
    EnforcementRun,
    Node,
    Orchestrator,
    Queue,
    QuotaGrant,
    QuotaRequest,
)
from scheduling.selectors import enforcement as enforcement_reads
from scheduling.services.enforcement import decisions as enforcement_decisions
from scheduling.services.enforcement import intent as enforcement_intent
from scheduling.services.enforcement import rounds as enforcement_rounds
from tests.support import active_grant


class FakeCluster:
    """A cluster holding native objects by id; ``down`` makes every read and write fail."""

    kueue = False

    def __init__(self) -> None:
        self.objects: dict[str, object] = {}
        self.down = False
        self.writes = 0

    def read(self, desired):
        if self.down:
            raise SourceUnavailable("connection refused")
        return list(self.objects.values())

    def apply(self, changes):
        results = []
        for change in changes:
            if self.down:
                results.append(ApplyResult(change.id, change.action, False, "connection refused"))
                continue
            if change.action is Action.DELETE:
                self.objects.pop(change.id, None)
            else:
                self.objects[change.id] = change.desired
            self.writes += 1
            results.append(ApplyResult(change.id, change.action, True))
        return results

    def account(self, name: str) -> SlurmAccount:
        return self.objects[f"slurm_account:{name}"]


@pytest.fixture
def clusters(monkeypatch):
    made: dict[str, FakeCluster] = {}

    def cluster_for(orchestrator):
        return made.setdefault(orchestrator.name, FakeCluster())

    monkeypatch.setattr(enforcement_rounds, "cluster_for", cluster_for)
    return made


def rounds(**kwargs) -> dict[str, enforcement_decisions.OrchestratorRound]:
    """One round's outcomes by orchestrator (the shared fleet's slurm-a is governed too, in review mode)."""
    return {o.orchestrator: o for o in enforcement_rounds.reconcile(**kwargs)}


def governed(name: str, kind: str = "slurm", mode: str = "auto", **options) -> Orchestrator:
    return Orchestrator.objects.create(
        name=name, kind=kind, endpoint=f"https://{name}.example:6820", options={"governance": {"mode": mode, **options}}
    )


def holding_the_fleet(orchestrator: Orchestrator) -> Orchestrator:
    """The fleet's GPUs (the shared fixture's 64, on slurm-a) moved to ``orchestrator``: the entitlement split
    puts a team's cap where the GPUs are, so a cluster with none would hold caps of 0."""
    Node.objects.update(orchestrator=orchestrator)
    return orchestrator


@pytest.fixture
def hpc(db):
    return holding_the_fleet(governed("hpc"))


def test_the_intent_is_built_from_teams_members_queues_and_live_grants(queues, cast, teams, period):
    now = timezone.now()
    request = QuotaRequest.objects.create(
        requester=cast["researcher"],
        team=teams["nlp"],
        gpus=8,
        starts_at=now,
        ends_at=now + timedelta(days=1),
        justification="x",
        state=QuotaRequest.State.APPROVED,
    )
    QuotaGrant.objects.create(request=request, team=teams["nlp"], gpus=8, starts_at=now, ends_at=request.ends_at)
    data = enforcement_intent.governance_input(now)
    by_slug = {t.slug: t for t in data.teams}
    assert by_slug["nlp"].parent == "research"
    assert by_slug["nlp"].members == ("nina", "rita")
    assert {(q.team, q.weight, q.guaranteed, q.burst_limit) for q in data.queues} >= {("research", 40.0, 16, 48)}
    assert [(g.team, g.gpus, g.revoked) for g in data.grants] == [("nlp", 8, False)]


def test_an_auto_round_writes_fairshare_and_caps_and_records_each_write_with_its_cause(queues, cast, hpc, clusters):
    queues["research"].weight = Decimal(40)
    queues["research"]._change_reason = "research gets 40 %"
    queues["research"]._history_user = cast["admin"]
    queues["research"].save()
    outcome = rounds()["hpc"]
    cluster = clusters["hpc"]
    assert cluster.account("research") == SlurmAccount("research", "root", 4000, (("gres/gpu", 48),))
    assert cluster.account("production").fairshare == 6000
    assert outcome.failed == [] and outcome.pending == [] and len(outcome.applied) == cluster.writes
    row = AppliedObject.objects.get(orchestrator=hpc, object_id="slurm_account:research")
    assert "research gets 40 %" in row.cause and row.caused_by == cast["admin"] and row.team == "research"
    assert row.history.first().history_change_reason == row.cause
    again = rounds()["hpc"]
    assert again.applied == [] and again.unchanged == len(outcome.applied)


def test_an_approved_grant_raises_the_cap_in_the_next_round(queues, cast, teams, hpc, clusters):
    enforcement_rounds.reconcile()
    active_grant(teams["research"], cast["lead"], 32)
    outcome = rounds()["hpc"]
    assert clusters["hpc"].account("research").grp_tres == (("gres/gpu", 48 + 32),)
    assert "slurm_account:research" in outcome.applied
    cause = AppliedObject.objects.get(object_id="slurm_account:research").cause
    assert "grant of research created" in cause


def test_a_review_round_stores_a_plan_and_writes_only_once_it_is_approved(queues, cast, clusters):
    governed("hpc-review", mode="review")
    outcome = rounds()["hpc-review"]
    assert clusters["hpc-review"].writes == 0 and outcome.pending
    plan = EnforcementPlan.objects.get(state=EnforcementPlan.State.PENDING, orchestrator__name="hpc-review")
    assert {c["id"] for c in plan.changes} == set(outcome.pending)
    enforcement_rounds.reconcile()
    waiting = EnforcementPlan.objects.filter(state=EnforcementPlan.State.PENDING, orchestrator__name="hpc-review")
    assert waiting.count() == 1  # the same plan kept
    with pytest.raises(ValidationError):
        enforcement_decisions.approve_plan(plan, by=cast["admin"], reason="")
    enforcement_decisions.approve_plan(plan, by=cast["admin"], reason="looks right")
    outcome = rounds()["hpc-review"]
    assert clusters["hpc-review"].writes == len(plan.changes) and outcome.pending == []
    plan.refresh_from_db()
    assert plan.state == EnforcementPlan.State.APPLIED and plan.history.filter(history_user=cast["admin"]).exists()


def test_a_rejected_plan_writes_nothing(queues, cast, clusters):
    governed("hpc-review", mode="review")
    enforcement_rounds.reconcile()
    plan = EnforcementPlan.objects.get(state=EnforcementPlan.State.PENDING, orchestrator__name="hpc-review")
    enforcement_decisions.reject_plan(plan, by=cast["admin"], reason="not now")
    enforcement_rounds.reconcile()
    assert clusters["hpc-review"].writes == 0


def hand_edit(cluster: FakeCluster, name: str, **settings) -> None:
    account = cluster.account(name)
    cluster.objects[object_id(account)] = SlurmAccount(**{**_fields(account), **settings})


def _fields(account: SlurmAccount) -> dict:
    return {
        "name": account.name,
        "parent": account.parent,
        "fairshare": account.fairshare,
        "grp_tres": account.grp_tres,
    }


def test_a_hand_edit_becomes_a_drift_finding_and_is_not_overwritten_until_an_admin_reverts_it(
    queues, cast, hpc, clusters
):
    enforcement_rounds.reconcile()
    cluster = clusters["hpc"]
    hand_edit(cluster, "research", fairshare=1)
    outcome = rounds()["hpc"]
    assert outcome.drifted == ["slurm_account:research"] and "slurm_account:research" in outcome.pending
    finding = DriftFinding.objects.get()
    assert finding.state == "open" and finding.fields == [{"field": "fairshare", "before": 4000, "after": 1}]
    enforcement_rounds.reconcile()
    assert cluster.account("research").fairshare == 1 and DriftFinding.objects.count() == 1
    enforcement_decisions.revert_drift(finding, by=cast["admin"], reason="hand edit by mistake")
    enforcement_rounds.reconcile()
    assert cluster.account("research").fairshare == 4000
    row = AppliedObject.objects.get(object_id="slurm_account:research")
    assert "drift reverted by ada: hand edit by mistake" in row.history.first().history_change_reason
    assert rounds()["hpc"].drifted == []


def test_an_adopted_drift_is_kept_until_the_portals_intent_changes(queues, cast, hpc, clusters):
    enforcement_rounds.reconcile()
    cluster = clusters["hpc"]
    hand_edit(cluster, "research", fairshare=1)
    enforcement_rounds.reconcile()
    finding = enforcement_decisions.adopt_drift(DriftFinding.objects.get(), by=cast["admin"], reason="agreed with ops")
    outcome = rounds()["hpc"]
    assert cluster.account("research").fairshare == 1 and outcome.drifted == [] and outcome.pending == []
    assert AppliedObject.objects.get(object_id="slurm_account:research").settings["fairshare"] == 1
    assert finding.history.filter(history_user=cast["admin"], state="adopted").exists()
    Queue.objects.filter(pk=queues["research"].pk).update(weight=Decimal(30))
    enforcement_rounds.reconcile()
    assert cluster.account("research").fairshare == 3000


def test_a_failing_orchestrator_keeps_its_changes_pending_and_the_others_proceed(queues, cast, clusters):
    governed("a-down")
    governed("b-up")
    clusters["a-down"] = FakeCluster()
    clusters["a-down"].down = True
    outcome = rounds()
    down, up = outcome["a-down"], outcome["b-up"]
    assert down.error and "connection refused" in down.error and up.applied and not up.error
    assert set(down.pending) == set(up.applied)  # the same intent, not yet applied there: retried next round
    assert not AppliedObject.objects.filter(orchestrator__name="a-down").exists()
    assert EnforcementOutcome.objects.get(orchestrator__name="a-down").error
    clusters["a-down"].down = False
    retried = rounds()["a-down"]
    assert retried.applied and AppliedObject.objects.filter(orchestrator__name="a-down").count() == len(retried.applied)


def test_a_write_that_fails_is_not_recorded_and_is_retried(queues, hpc, clusters):
    cluster = clusters.setdefault("hpc", FakeCluster())
    original = cluster.apply

    def half(changes):
        results = original(changes[:1])
        return results + [ApplyResult(c.id, c.action, False, "refused") for c in changes[1:]]

    cluster.apply = half
    first = rounds()["hpc"]
    assert len(first.applied) == 1 and first.failed and set(first.failed) <= set(first.pending)
    assert AppliedObject.objects.filter(orchestrator=hpc).count() == 1
    cluster.apply = original
    second = rounds()["hpc"]
    assert set(second.applied) == set(first.failed)


def test_a_dry_run_writes_nothing_to_the_cluster_or_the_database(queues, hpc, clusters):
    outcome = rounds(dry_run=True)["hpc"]
    assert outcome.applied and clusters["hpc"].writes == 0
    assert not AppliedObject.objects.exists() and not EnforcementOutcome.objects.exists()


def test_the_governance_command_prints_a_round_as_json(queues, hpc, clusters):
    out = StringIO()
    call_command("governance", "--once", "--json", stdout=out)
    report = json.loads(out.getvalue())
    assert set(report["hpc"]) >= {"applied", "unchanged", "drifted", "failed"}
    assert report["hpc"]["applied"] > 0


def test_the_team_page_selector_shows_intent_beside_what_is_enforced(queues, cast, teams, hpc, clusters):
    governed("ray-pool", kind="ray")
    enforcement_rounds.reconcile()
    hand_edit(clusters["hpc"], "research", fairshare=1)
    enforcement_rounds.reconcile()
    rows = enforcement_reads.team_enforcement(teams["research"])
    slurm = next(r for r in rows if r.orchestrator == "hpc")
    research = next(o for o in slurm.objects if o.object_id == "slurm_account:research")
    assert research.drift and research.enforced["fairshare"] == 1 and research.intent["fairshare"] == 4000
    ray = next(r for r in rows if r.orchestrator == "ray-pool")
    assert ray.pool_level_only


def test_the_mode_is_an_option_the_schema_checks(db):
    bad = Orchestrator(name="x", kind="slurm", endpoint="https://x.example", options={"governance": {"mode": "yolo"}})
    with pytest.raises(ValidationError, match=r"options\.governance\.mode"):
        bad.full_clean()


# ------------------------------------------------------------------------------------------------- pages


@pytest.mark.parametrize("role", ["researcher", "lead", "outsider"])
def test_only_admins_reach_the_governance_page(client, cast, role):
    client.force_login(cast[role])
    assert client.get(reverse("governance")).status_code == 403
    assert reverse("governance") not in client.get(reverse("overview")).content.decode()


def test_an_admin_approves_a_plan_and_adopts_a_drift_on_the_governance_page(client, queues, cast, hpc, clusters):
    governed("hpc-review", mode="review")
    enforcement_rounds.reconcile()
    hand_edit(clusters["hpc"], "research", fairshare=1)
    enforcement_rounds.reconcile()
    client.force_login(cast["admin"])
    page = client.get(reverse("governance")).content.decode()
    assert "slurm_account:research" in page and "fairshare: applied 4000, found 1" in page
    plan = EnforcementPlan.objects.get(state="pending", orchestrator__name="hpc-review")
    refused = client.post(reverse("governance"), {"decision": "approve", "pk": plan.pk, "reason": ""}, follow=True)
    assert "A reason is required" in refused.content.decode()
    client.post(reverse("governance"), {"decision": "approve", "pk": plan.pk, "reason": "ok"})
    finding = DriftFinding.objects.get(state="open")
    client.post(reverse("governance"), {"decision": "adopt", "pk": finding.pk, "reason": "ops asked"})
    plan.refresh_from_db()
    finding.refresh_from_db()
    assert plan.state == "approved" and finding.state == "adopted" and finding.decided_by == cast["admin"]


def research_drifted_beside_a_ray_pool(clusters) -> None:
    """hpc enforced, then research's Fairshare edited by hand there (an open drift); a Ray pool governed too."""
    holding_the_fleet(governed("hpc"))
    governed("ray-pool", kind="ray")
    enforcement_rounds.reconcile()
    hand_edit(clusters["hpc"], "research", fairshare=1)
    enforcement_rounds.reconcile()


def test_the_team_page_shows_enforcement_with_drift_badges_and_the_ray_note(client, queues, cast, teams, clusters):
    research_drifted_beside_a_ray_pool(clusters)
    client.force_login(cast["lead"])
    page = client.get(reverse("team-detail", args=["research"])).content.decode()
    assert "Enforced on the clusters" in page and 'badge bad">drift' in page
    assert "Ray: pool-level only" in page and "fairshare=4000" in page and "fairshare=1" in page


def test_a_decision_on_an_unknown_or_malformed_id_is_a_404(client, cast):
    client.force_login(cast["admin"])
    for pk in ("999", "abc", "²"):
        assert client.post(reverse("governance"), {"decision": "adopt", "pk": pk, "reason": "x"}).status_code == 404


def test_rounds_older_than_the_retention_are_pruned(queues, hpc, clusters, settings):
    settings.GPUPORTAL_SAMPLE_RETENTION_DAYS = 1
    enforcement_rounds.reconcile(at=timezone.now() - timedelta(days=3))
    enforcement_rounds.reconcile()
    assert EnforcementRun.objects.count() == 1 and AppliedObject.objects.exists()


def test_a_namespace_mapping_naming_an_unknown_team_fails_that_orchestrator_before_any_write(queues, clusters):
    governed("k8s", kind="kubernetes", namespaces={"research": ["research-a"], "ghosts": ["ghosts"]})
    outcome = rounds()["k8s"]
    assert "options.governance.namespaces: k8s: 'ghosts' is not a team" in outcome.error
    assert clusters["k8s"].writes == 0


def test_the_beat_runs_a_governance_round_every_round(settings, queues, hpc, clusters):
    from scheduling import tasks

    entry = settings.CELERY_BEAT_SCHEDULE["reconcile-governance"]
    assert entry == {"task": "scheduling.tasks.reconcile_governance", "schedule": settings.GPUPORTAL_ROUND_SECONDS}
    assert tasks.reconcile_governance()["hpc"]["applied"] > 0


def test_an_admin_switches_an_orchestrators_mode_with_a_reason_and_it_is_audited(client, cast, hpc):
    before = enforcement_intent.mode_of(hpc)
    other = "review" if before == "auto" else "auto"
    client.force_login(cast["admin"])
    page = client.get(reverse("governance")).content.decode()
    assert 'id="modes"' in page and hpc.name in page
    form = {"decision": "mode", "pk": hpc.pk, "mode": other}
    refused = client.post(reverse("governance"), {**form, "reason": ""}, follow=True)
    assert "A reason is required" in refused.content.decode()
    assert enforcement_intent.mode_of(Orchestrator.objects.get(pk=hpc.pk)) == before
    bad = client.post(reverse("governance"), {**form, "mode": "yolo", "reason": "x"}, follow=True)
    assert "one of auto, review" in bad.content.decode()
    done = client.post(reverse("governance"), {**form, "reason": "trusted now"}, follow=True)
    assert f"is in {other} mode" in done.content.decode()
    hpc.refresh_from_db()
    latest = hpc.history.first()
    assert enforcement_intent.mode_of(hpc) == other
    assert latest.history_change_reason == "trusted now" and latest.history_user == cast["admin"]


class NamespacesOnly:
    """A Kubernetes API holding only the namespace ``research``: any write is recorded."""

    def __init__(self) -> None:
        self.writes: list[str] = []

    def namespace_names(self):
        return {"research", "kube-system"}

    def read_namespaces(self):
        return []

    read_quotas = read_volcano_queues = read_namespaces

    def __getattr__(self, name):
        return lambda *args, **kwargs: self.writes.append(name)


def test_a_mapping_naming_a_namespace_missing_from_the_cluster_stops_that_round_before_any_write(
    queues, clusters, monkeypatch
):
    k8s = governed("k8s", kind="kubernetes", namespaces={"research": ["research"], "nlp": ["nlp-train"]})
    api = NamespacesOnly()
    cluster = KubernetesCluster(api, volcano=True, mapped={"research": ["research"], "nlp": ["nlp-train"]})
    real_cluster_for = enforcement_rounds.cluster_for
    monkeypatch.setattr(enforcement_rounds, "cluster_for", lambda o: cluster if o == k8s else real_cluster_for(o))
    outcome = rounds()["k8s"]
    assert "options.governance.namespaces.nlp: namespace 'nlp-train' does not exist on the cluster" in outcome.error
    assert "namespace 'research'" not in outcome.error  # the existing one is not blamed
    assert api.writes == [] and outcome.applied == []
    assert not AppliedObject.objects.filter(orchestrator=k8s).exists()
    assert "k8s_resource_quota:research/gpuportal-gpu" in outcome.pending  # waits for the mapping to be fixed


def test_the_fairshare_editor_shows_what_each_cluster_enforces_with_drift_and_the_ray_note(
    client, queues, cast, clusters
):
    research_drifted_beside_a_ray_pool(clusters)
    client.force_login(cast["admin"])
    page = client.get(reverse("fairshare")).content.decode()
    section = page.split('id="enforced-shares"', 1)[1]
    production = section.split('<th scope="row">production</th><td>hpc</td>', 1)[1].split("</tr>", 1)[0]
    assert 'badge ok">enforced' in production and "Fairshare 6000 · GrpTRES gres/gpu=64" in production
    research = section.split('<th scope="row">research</th><td>hpc</td>', 1)[1].split("</tr>", 1)[0]
    assert 'badge bad">drift' in research
    assert "ray-pool: Ray: pool-level only" in section


def test_a_team_slug_kubernetes_cannot_name_is_left_out_there_alone_and_slurm_is_governed(queues, teams, clusters):
    # Issue 29 item 7: "ML_Ops" (a valid slug, a valid Slurm account, not a DNS-1123 label) halted every orchestrator.
    from scheduling.models import Team

    Team.objects.create(slug="ML_Ops", name="ML Ops", parent=teams["research"])
    governed("hpc")
    governed("k8s-a", kind="kubernetes")
    outcome = rounds()
    slurm, k8s = outcome["hpc"], outcome["k8s-a"]
    assert "slurm_account:ML_Ops" in slurm.applied and not slurm.error
    assert "k8s_namespace:nlp" in k8s.applied and not any("ML_Ops" in i for i in k8s.applied)
    assert "k8s-a: 'ML_Ops' names a queue and is not a DNS-1123 label" in k8s.error
    assert EnforcementOutcome.objects.get(orchestrator__name="k8s-a").error.startswith("left out: team.slug: k8s-a:")
