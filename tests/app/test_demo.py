from collections import Counter
from datetime import timedelta

import pytest
from django.conf import settings
from django.db.models import Sum
from django.utils import timezone

from scheduling.models import Node, QuotaGrant, QuotaRequest, UsageRollup, UsageSample, Workload
from scheduling.services import demo

pytestmark = pytest.mark.django_db


@pytest.fixture
def federation():
    demo.create_demo_federation()
    demo.fill_history(days=0.25, step_s=600)


def _gpus_held_per_node() -> Counter:
    held: Counter = Counter()
    for nodes in Workload.objects.filter(state=Workload.State.RUNNING).values_list("nodes", flat=True):
        for assignment in nodes:
            held[assignment["node"]] += len(assignment["gpus"])
    return held


def test_the_demo_fleet_has_three_orchestrators_with_topology(federation):
    assert Node.objects.count() == 40
    assert set(Node.objects.values_list("orchestrator__kind", flat=True)) == {"slurm", "kubernetes", "ray"}
    assert Node.objects.values("leaf_switch").distinct().count() == 4


def test_history_replays_real_trace_jobs_without_overallocating(federation):
    assert Workload.objects.filter(state=Workload.State.COMPLETED).exists()
    held = _gpus_held_per_node()
    for node in Node.objects.all():
        assert node.gpu_allocated == held[node.name] <= node.gpu_total


def test_a_live_round_moves_the_numbers_and_keeps_nodes_consistent(federation):
    before = set(Workload.objects.values_list("external_id", "state"))
    result = demo.run_demo_round(timezone.now() + timedelta(minutes=20))
    assert result.started or result.finished
    assert set(Workload.objects.values_list("external_id", "state")) != before
    held = _gpus_held_per_node()
    for node in Node.objects.all():
        assert node.gpu_allocated == held[node.name] <= node.gpu_total


def test_pending_work_carries_the_engines_reason(federation):
    demo.run_demo_round(timezone.now() + timedelta(minutes=20))
    pending = Workload.objects.filter(state=Workload.State.PENDING)
    assert all(w.pending_reason for w in pending)


def test_hourly_rollups_hold_exactly_the_sampled_gpu_seconds(federation):
    sampled = sum(s.gpus_allocated * s.interval_s for s in UsageSample.objects.all())
    rolled = UsageRollup.objects.filter(resolution="hour").aggregate(total=Sum("gpu_s_allocated"))["total"]
    daily = UsageRollup.objects.filter(resolution="day").aggregate(total=Sum("gpu_s_allocated"))["total"]
    assert sampled > 0
    assert rolled == pytest.approx(sampled)
    assert daily == pytest.approx(sampled)


def test_demo_setup_is_idempotent(federation):
    nodes, users = Node.objects.count(), Workload.objects.count()
    demo.create_demo_federation()
    assert (Node.objects.count(), Workload.objects.count()) == (nodes, users)


def test_the_replayed_history_has_its_scrapes_so_a_report_over_it_finds_every_source_fresh():
    """A week's report judges staleness from that week's scrapes: a history with one scrape at its end read
    as "stale 167.7 h, fresh 0.2 %" beside thousands of allocated GPU-hours."""
    from scheduling.models import CollectorRun
    from scheduling.reports.capacity import Window, completeness_section
    from scheduling.selectors.report import WeekReads

    now = timezone.now()
    demo.create_demo_federation()
    demo.fill_history(days=0.25, step_s=300, now=now)
    assert CollectorRun.objects.filter(ok=True).count() == 3 * 72  # a scrape per 5-minute step and source
    section = completeness_section(Window(now - timedelta(hours=5), now, "UTC"), {}, WeekReads(outlook=list))
    assert {s.name for s in section.sources} == {"slurm-hpc", "k8s-serving", "ray-sweeps"}
    assert all(s.stale_h == 0 and s.fresh_pct == 100 for s in section.sources), section.sources


def test_the_demo_people_own_some_of_their_teams_jobs(federation):
    """So "My workloads" shows alice and bob work of their own in the demo."""
    assert Workload.objects.filter(user="alice").exclude(team__slug="nlp").count() == 0
    assert Workload.objects.filter(user="alice", team__slug="nlp").exists()
    assert Workload.objects.filter(user="bob", team__slug="inference").exists()


def test_the_demo_files_a_pending_request_and_a_grant_that_ends_soon_once():
    demo.create_demo_federation()
    assert demo.seed_quota_requests() == 2
    states = dict(QuotaRequest.objects.values_list("requester__username", "state"))
    assert states == {"alice": QuotaRequest.State.SUBMITTED, "bob": QuotaRequest.State.APPROVED}
    grant = QuotaGrant.objects.get(request__requester__username="bob")
    assert grant.ends_at - timezone.now() < timedelta(days=settings.GPUPORTAL_GRANT_REMINDER_DAYS)
    assert demo.seed_quota_requests() == 0 and QuotaRequest.objects.count() == 2
