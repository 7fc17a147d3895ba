"""Finished jobs and their efficiency (issue #33 item 15): figures computed by the database, each reader's rows
as selectors/access.py allows, search and filters, totals, and the CSV of what the table shows."""

import csv
import io
from datetime import timedelta

import pytest
from django.utils import timezone

from scheduling.models import Workload, WorkloadUtilisation
from scheduling.selectors.finished_jobs import finished_workloads, totals


@pytest.fixture
def finished(cast, teams, orchestrator):
    """rita's 2 × 4-GPU job in nlp (30 min wait, 2 h run, DCGM says 75 % busy); nina's unmeasured nlp job; otto's
    production job; and a running nlp job, which is not finished."""
    now = timezone.now()

    def job(external_id, user, team, *, gang=1, per=1, wait_min=0, run_h=1.0, state="completed", **extra):
        submitted = now - timedelta(hours=run_h, minutes=wait_min + 5)
        started = submitted + timedelta(minutes=wait_min)
        return Workload.objects.create(
            orchestrator=orchestrator, external_id=external_id, user=user, team=teams[team], gang_size=gang,
            gpus_per_member=per, state=state, submitted_at=submitted, started_at=started,
            finished_at=started + timedelta(hours=run_h) if state != "running" else None, **extra,
        )

    rita = job("4711", "rita", "nlp", gang=2, per=4, wait_min=30, run_h=2, name="llama-sweep")
    WorkloadUtilisation.objects.create(workload=rita, allocated_gpu_s=8 * 7200, busy_gpu_s=0.75 * 8 * 7200,
                                       idle_allocated_gpu_s=3600, samples=240)
    nina = job("4712", "nina", "nlp", per=2, run_h=1, state="failed")
    otto = job("9001", "otto", "production", per=8, run_h=3)
    job("4713", "rita", "nlp", state="running")
    return {"rita": rita, "nina": nina, "otto": otto}


def ids(user):
    return {w.external_id for w in finished_workloads(user)}


def test_each_reader_sees_what_access_allows(cast, finished, django_user_model):
    assert ids(cast["admin"]) == {"4711", "4712", "9001"}
    assert ids(cast["nlp_lead"]) == {"4711", "4712"}  # the team's history is a lead's to read
    assert ids(cast["lead"]) == {"4711", "4712"}  # research's lead: nlp is below research
    assert ids(cast["researcher"]) == {"4711"}  # their own, never a teammate's history
    assert ids(django_user_model.objects.create_user("nobody", password="pw")) == set()


def test_the_figures_are_gpu_hours_wait_and_busy_share_where_measured(cast, finished):
    rows = {w.external_id: w for w in finished_workloads(cast["admin"])}
    rita, nina = rows["4711"], rows["4712"]
    assert (rita.gpu_count, round(rita.gpu_hours, 3), round(rita.wait_s)) == (8, 16.0, 1800)
    assert (round(rita.busy_pct, 1), round(rita.idle_gpu_hours, 3)) == (75.0, 1.0)
    assert nina.busy_pct is None and round(nina.gpu_hours, 3) == 2.0
    summary = totals(finished_workloads(cast["admin"]))
    assert (summary.jobs, round(summary.gpu_hours, 3), summary.measured_jobs) == (3, 42.0, 1)
    assert round(summary.busy_pct, 1) == 75.0


def test_the_page_searches_filters_and_downloads_what_it_shows(client, cast, finished):
    client.force_login(cast["nlp_lead"])
    page = client.get("/workloads/finished/", {"q": "llama"}).content.decode()
    assert "slurm-a:4711" in page and "slurm-a:4712" not in page and "75 %" in page
    page = client.get("/workloads/finished/", {"state": "failed"}).content.decode()
    assert "slurm-a:4712" in page and "not measured" in page and "slurm-a:4711" not in page
    download = client.get("/workloads/finished/", {"team": "nlp", "export": "csv"})
    rows = list(csv.reader(io.StringIO(download.content.decode())))
    assert rows[0] == ["Job", "Team", "User", "Orchestrator", "GPUs", "GPU-hours", "Wait", "GPU busy",
                       "Idle GPU-hours", "State", "Ended (UTC)"]
    by_job = {row[0]: row for row in rows[1:]}
    assert set(by_job) == {"slurm-a:4711", "slurm-a:4712"}
    assert by_job["slurm-a:4711"][4:9] == ["8", "16.000", "30 min", "75.0", "1.000"]
    assert by_job["slurm-a:4712"][7] == ""


def test_bad_input_names_the_field(client, cast, finished):
    client.force_login(cast["admin"])
    refused = client.get("/workloads/finished/", {"finished_after": "yesterday", "q": "a\x00b"})
    said = [text in refused.content.decode() for text in ("Ended from (ISO time):", "Job ID or name:", "No finished")]
    assert (refused.status_code, said) == (400, [True, True, True])


def test_the_list_starts_a_day_back_unless_asked_for_earlier(client, cast, finished):
    old = finished["otto"]
    old.finished_at = old.started_at = old.submitted_at = old.finished_at - timedelta(days=2)
    old.save()
    client.force_login(cast["admin"])
    assert "slurm-a:9001" not in client.get("/workloads/finished/").content.decode()
    since = f"{old.finished_at - timedelta(days=1):%Y-%m-%dT%H:%M}"
    assert "slurm-a:9001" in client.get("/workloads/finished/", {"finished_after": since}).content.decode()
