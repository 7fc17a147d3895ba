"""Issue 31, items 5 and 6: one governance round at a time (the round lease), each object's state surviving a round
cut short, and pages that say "enforced" only where the last round read the cluster back equal to the intent
(adopted drift, user associations, a failed write, an unreachable cluster, Ray)."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from django.urls import reverse
from django.utils import timezone

from scheduling import tasks
from scheduling.collectors.governance_apply import ApplyResult
from scheduling.models import DriftFinding, EnforcementOutcome, EnforcementRun, Orchestrator, Queue
from scheduling.selectors import enforcement as enforcement_reads
from scheduling.services.enforcement import decisions as enforcement_decisions
from scheduling.services.enforcement import intent as enforcement_intent
from scheduling.services.enforcement import rounds as enforcement_rounds
from tests.app import test_enforcement as base
from tests.app.test_enforcement import FakeCluster, governed, hand_edit

clusters, hpc = base.clusters, base.hpc  # the fake clusters and the auto-mode Slurm orchestrator "hpc"


def _holding_round(started_ago_s: float = 0, beat_ago_s: float = 0) -> EnforcementRun:
    """A round another worker is running: unfinished, its heartbeat ``beat_ago_s`` old."""
    now = timezone.now()
    return EnforcementRun.objects.create(
        started_at=now - timedelta(seconds=started_ago_s), heartbeat_at=now - timedelta(seconds=beat_ago_s)
    )


# ------------------------------------------------------------------------------------------ one round at a time


class ReentrantCluster(FakeCluster):
    """While the round reads it, a second round starts (the beat's while a triggered one runs)."""

    def __init__(self) -> None:
        super().__init__()
        self.second: list[object] = []

    def read(self, desired):
        try:
            self.second.append(enforcement_rounds.reconcile())
        except enforcement_rounds.RoundInProgress as busy:
            self.second.append(busy)
        return super().read(desired)


def test_a_round_started_while_another_runs_is_refused_and_writes_nothing(queues, hpc, clusters):
    clusters["hpc"] = cluster = ReentrantCluster()
    outcome = {o.orchestrator: o for o in enforcement_rounds.reconcile()}["hpc"]
    assert isinstance(cluster.second[0], enforcement_rounds.RoundInProgress)
    assert EnforcementRun.objects.count() == 1
    assert cluster.writes == len(outcome.applied) > 0  # each object written once, by the round holding the lease
    assert EnforcementRun.objects.get().finished_at is not None


def test_the_beat_round_skips_while_another_round_holds_the_lease(queues, hpc, clusters):
    holder = _holding_round(started_ago_s=5)
    assert tasks.reconcile_governance() is None
    assert list(EnforcementRun.objects.all()) == [holder] and "hpc" not in clusters


def test_a_triggered_round_behind_an_older_round_in_progress_runs_once_that_round_is_over(
    monkeypatch, queues, hpc, clusters
):
    holder = _holding_round(started_ago_s=30)
    requested = timezone.now() - timedelta(seconds=1)  # after the holder read the intent: it may have missed it
    tries = []
    claim = enforcement_rounds.begin_round

    def older_round_ends_after_the_first_try(*args, **kwargs):
        tries.append(timezone.now())
        try:
            return claim(*args, **kwargs)
        finally:
            EnforcementRun.objects.filter(pk=holder.pk).update(finished_at=timezone.now())

    monkeypatch.setattr(enforcement_rounds, "begin_round", older_round_ends_after_the_first_try)
    result = tasks.reconcile_governance_soon.apply(kwargs={"requested_at": requested.isoformat()})
    assert len(tries) == 2 and result.state == "SUCCESS"  # refused, retried (eagerly here), then ran
    assert result.result["hpc"]["applied"] > 0 and EnforcementRun.objects.count() == 2


def test_a_triggered_round_skips_when_a_round_in_progress_began_after_the_change(queues, hpc, clusters):
    requested = timezone.now() - timedelta(seconds=30)
    _holding_round(started_ago_s=5)  # began after the change: it reads it
    assert tasks.reconcile_governance_soon(requested_at=requested.isoformat()) is None
    assert EnforcementRun.objects.count() == 1


def test_a_round_whose_heartbeat_went_stale_is_closed_as_cut_short_and_the_next_round_runs(
    settings, queues, hpc, clusters
):
    settings.GPUPORTAL_GOVERNANCE_ROUND_STALE_S = 60
    dead = _holding_round(started_ago_s=600, beat_ago_s=300)
    outcomes = enforcement_rounds.reconcile()
    dead.refresh_from_db()
    assert dead.finished_at is not None and dead.error.startswith("cut short: no sign of life since")
    assert [o.orchestrator for o in outcomes] == ["hpc", "slurm-a"] and outcomes[0].applied


def test_a_round_whose_lease_was_taken_stops_before_the_next_orchestrator(queues, clusters):
    governed("a-first")
    governed("b-second")

    class Usurped(FakeCluster):
        def read(self, desired):  # a later round took the lease while this one hung here
            EnforcementRun.objects.filter(finished_at__isnull=True).update(
                finished_at=timezone.now(), error="cut short"
            )
            return super().read(desired)

    clusters["a-first"] = Usurped()
    outcomes = enforcement_rounds.reconcile()
    assert [o.orchestrator for o in outcomes] == ["a-first"] and "b-second" not in clusters
    assert EnforcementRun.objects.get().error == "cut short"  # the holder no longer finishes a round it lost


def test_the_governance_command_says_a_round_is_in_progress(queues, hpc, clusters):
    from django.core.management import CommandError, call_command

    _holding_round()
    with pytest.raises(CommandError, match="is in progress"):
        call_command("governance", "--once")


# --------------------------------------------------------------------------- per-object state, a round cut short


def _failing_after_first(cluster: FakeCluster) -> None:
    """The connection drops after the first write: the rest of the round's writes fail."""
    original = cluster.apply

    def half(changes):
        return original(changes[:1]) + [ApplyResult(c.id, c.action, False, "connection reset") for c in changes[1:]]

    cluster.apply = half


def test_a_round_cut_short_fails_only_the_objects_it_failed_on_the_fairshare_editor(queues, hpc, clusters):
    enforcement_rounds.reconcile()
    enforcement_rounds.reconcile()  # everything read back equal: enforced
    Queue.objects.filter(team__slug__in=("research", "production")).update(weight=Decimal(45))
    _failing_after_first(clusters["hpc"])
    enforcement_rounds.reconcile()  # production's write goes through, then the connection drops
    outcome = EnforcementOutcome.objects.filter(orchestrator=hpc).latest("pk")
    failed = {outcome.object_ids["teams"][i] for i in outcome.object_ids["failed"]}
    applied = {outcome.object_ids["teams"][i] for i in outcome.object_ids["applied"]}
    assert outcome.error and failed and applied and not failed & applied
    holds, _ = enforcement_reads.share_enforcement()
    status = {slug: next(h.status for h in rows if h.orchestrator == "hpc") for slug, rows in holds.items()}
    assert {slug for slug, state in status.items() if state == "failed"} == failed
    assert all(status[slug] == "applied" for slug in applied)
    assert status["nlp"] == "enforced"  # untouched by the round that failed


def test_an_unreachable_cluster_leaves_objects_as_last_read_back_not_failed(client, queues, cast, teams, hpc, clusters):
    enforcement_rounds.reconcile()
    enforcement_rounds.reconcile()  # read back equal: enforced
    clusters["hpc"].down = True
    enforcement_rounds.reconcile()
    holds, _ = enforcement_reads.share_enforcement()
    assert {h.status for rows in holds.values() for h in rows if h.orchestrator == "hpc"} == {"unverified"}
    row = next(r for r in enforcement_reads.team_enforcement(teams["research"]) if r.orchestrator == "hpc")
    assert not row.read_back and row.read_back_at is not None
    assert {o.state for o in row.objects} == {"unverified"}
    client.force_login(cast["lead"])
    page = client.get(reverse("team-detail", args=["research"])).content.decode()
    assert "The last round could not read hpc" in page and 'badge ok">enforced' not in page


# ------------------------------------------------------------------------------------------------ what pages say


def test_an_object_written_this_round_reads_applied_until_a_round_reads_it_back(queues, teams, hpc, clusters):
    enforcement_rounds.reconcile()
    row = next(r for r in enforcement_reads.team_enforcement(teams["research"]) if r.orchestrator == "hpc")
    assert {o.state for o in row.objects} == {"applied"}
    enforcement_rounds.reconcile()
    row = next(r for r in enforcement_reads.team_enforcement(teams["research"]) if r.orchestrator == "hpc")
    assert {o.state for o in row.objects} == {"enforced"}


def test_an_adopted_drift_reads_adopted_with_both_values_not_enforced(client, queues, cast, teams, hpc, clusters):
    enforcement_rounds.reconcile()
    hand_edit(clusters["hpc"], "research", fairshare=1)
    enforcement_rounds.reconcile()
    enforcement_decisions.adopt_drift(DriftFinding.objects.get(), by=cast["admin"], reason="agreed with ops")
    enforcement_rounds.reconcile()
    row = next(r for r in enforcement_reads.team_enforcement(teams["research"]) if r.orchestrator == "hpc")
    account = next(o for o in row.objects if o.object_id == "slurm_account:research")
    assert account.state == "adopted" and account.enforced["fairshare"] == 1 and account.intent["fairshare"] == 4000
    assert account.note == "adopted: cluster holds fairshare=1, portal wants fairshare=4000"  # the fields that differ
    holds, _ = enforcement_reads.share_enforcement()
    research = next(h for h in holds["research"] if h.orchestrator == "hpc")
    assert research.status == "adopted"
    assert (
        research.enforced.startswith("adopted: cluster holds Fairshare 1")
        and "portal wants Fairshare 4000" in research.enforced
    )
    client.force_login(cast["lead"])
    page = client.get(reverse("team-detail", args=["research"])).content.decode()
    research_row = page.split("<code>slurm_account:research</code>", 1)[1].split("</tr>", 1)[0]
    assert 'badge warn">adopted' in research_row and 'badge ok">enforced' not in research_row


def test_a_user_association_that_exists_reads_wanted_and_present(client, queues, cast, teams, hpc, clusters):
    enforcement_rounds.reconcile()
    enforcement_rounds.reconcile()
    client.force_login(cast["lead"])
    page = client.get(reverse("team-detail", args=["nlp"])).content.decode()
    rita = page.split("<code>slurm_user:nlp/rita</code>", 1)[1].split("</tr>", 1)[0]
    assert "not wanted" not in rita and "absent" not in rita
    assert "<td>wanted</td>" in rita and "<td>present</td>" in rita and 'badge ok">enforced' in rita


def test_ray_team_caps_read_observed_not_enforced(client, queues, cast, teams, clusters):
    governed("ray-pool", kind="ray")
    enforcement_rounds.reconcile()
    client.force_login(cast["lead"])
    page = client.get(reverse("team-detail", args=["research"])).content.decode()
    enforced = page.split('id="enforcement"', 1)[1].split("</section>", 1)[0]
    ray = enforced.split("ray-pool", 1)[1].split("</p>", 1)[0]
    assert "observed, not enforced" in ray and "bounds are enforced" not in page


# ------------------------------------------------------------------------------- registering a governed site


def test_register_orchestrator_takes_the_governance_options_and_a_round_uses_them(db, tmp_path, settings):
    """docs/governance.md's registration, end to end: the round runs the named sacctmgr with SLURM_CONF set and
    the named cluster (a script standing in for the fleet's sacctmgr logs what it was run with). The program
    and slurm.conf lie where the site allows them (GPUPORTAL_SLURM_BIN_DIRS, GPUPORTAL_CREDENTIALS_DIRS)."""
    from django.core.management import call_command

    settings.GPUPORTAL_SLURM_BIN_DIRS = [str(tmp_path)]
    settings.GPUPORTAL_CREDENTIALS_DIRS = [str(tmp_path)]
    slurm_conf = tmp_path / "slurm.conf"
    slurm_conf.write_text("ClusterName=gpu24\n")
    log = tmp_path / "sacctmgr.log"
    sacctmgr = tmp_path / "sacctmgr"
    sacctmgr.write_text(f'#!/bin/sh\necho "SLURM_CONF=$SLURM_CONF $*" >> {log}\n')
    sacctmgr.chmod(0o755)
    args = ["--kind", "slurm", "--name", "hpc24", "--url", "http://127.0.0.1:9"]
    governance = ["--governance-mode", "auto", "--slurm-cluster", "gpu24", "--sacctmgr", str(sacctmgr)]
    call_command("register_orchestrator", *args, *governance, "--slurm-conf", str(slurm_conf))
    orchestrator = Orchestrator.objects.get(name="hpc24")
    assert enforcement_intent.mode_of(orchestrator) == "auto"
    enforcement_rounds.cluster_for(orchestrator).read(None)
    assert f"SLURM_CONF={slurm_conf}" in log.read_text() and "cluster=gpu24" in log.read_text()
    call_command("register_orchestrator", *args, "--governance-mode", "review")  # one key changed, the rest kept
    orchestrator.refresh_from_db()
    assert orchestrator.options["governance"] == {"mode": "review", "cluster": "gpu24", "sacctmgr": str(sacctmgr)}


def test_register_orchestrator_refuses_a_bad_governance_option_by_name(db):
    from django.core.management import CommandError, call_command

    args = ["--name", "x", "--url", "http://127.0.0.1:9"]
    with pytest.raises(CommandError, match="--sacctmgr: only for --kind slurm"):
        call_command("register_orchestrator", "--kind", "ray", *args, "--sacctmgr", "/usr/bin/sacctmgr")
    with pytest.raises(CommandError, match="governance"):
        call_command("register_orchestrator", "--kind", "slurm", *args, "--slurm-cluster", "bad name!")
    assert not Orchestrator.objects.filter(name="x").exists()
