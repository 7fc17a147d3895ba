"""Real headless chromium on "my workloads": alice's Slurm job waits at her team's cap, and the page says
what to do about it, with a link to the quota form for her team."""

from datetime import timedelta

import pytest
from django.utils import timezone

from scheduling.models import Orchestrator, Team, Workload

pytestmark = pytest.mark.browser


def test_alice_sees_her_pending_job_explained_with_a_request_quota_link(session, federation):
    job = Workload.objects.create(
        orchestrator=Orchestrator.objects.get(name="slurm-hpc"), team=Team.objects.get(slug="nlp"), user="alice",
        external_id="alice-capped-1", gpus_per_member=8, state=Workload.State.PENDING,
        pending_reason="AssocGrpGRES", submitted_at=timezone.now() - timedelta(minutes=10),
        duration_estimate_s=3_600,
    )
    alice = session()
    alice.log_in("alice", "alice")
    row = alice.my_workload_row("alice-capped", job.pk)
    assert "slurm-hpc:alice-capped-1" in row.inner_text()
    assert "your team is at its GPU limit of" in row.locator(".explanation").inner_text()
    assert alice.request_quota_from(row, "nlp") == str(job.team_id)
    assert alice.errors == []


def test_on_a_phone_a_pending_job_row_stays_short(session, federation):
    """The explanation keeps a readable width and the table scrolls sideways: squeezed into the last column of
    a 390 px screen it made each row ~300 px tall."""
    job = Workload.objects.create(
        orchestrator=Orchestrator.objects.get(name="slurm-hpc"), team=Team.objects.get(slug="nlp"), user="alice",
        external_id="alice-capped-2", gpus_per_member=8, state=Workload.State.PENDING,
        pending_reason="AssocGrpGRES", submitted_at=timezone.now() - timedelta(minutes=10),
        duration_estimate_s=3_600,
    )
    alice = session(width=390)
    alice.log_in("alice", "alice")
    row = alice.go("/workloads/mine/?q=alice-capped-2").locator(f"#workload-{job.pk}")
    assert "your team is at its GPU limit of" in row.locator(".explanation").inner_text()
    assert row.bounding_box()["height"] < 200, row.bounding_box()
    assert alice.errors == []
