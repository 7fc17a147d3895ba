"""Where the ledger shows: the API (shared FilterSet, audited inventory writes), the page, the overview
banner, /metrics, and the demo federation (healthy: no finding at all)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from scheduling.models import FleetHost, LedgerFinding, NodeAlias
from scheduling.services import demo, ledger

pytestmark = pytest.mark.django_db


@pytest.fixture
def with_double(two_sources, rounds):
    two_sources.k8s_owns.add("dgx02")
    two_sources.round(rounds(0))
    two_sources.slurm_owns.discard("dgx01")
    two_sources.k8s_owns.add("dgx01")
    two_sources.round(rounds(1))  # dgx01 moved cleanly; dgx02 still doubly owned
    return two_sources


def test_the_findings_api_filters_with_the_pages_filterset(api, with_double):
    client = api("researcher")
    rows = client.get("/api/v1/ledger/findings/", {"kind": "double_ownership", "status": "open"}).json()["results"]
    assert [(r["node"], r["orchestrators"], r["status"]) for r in rows] == [
        ("dgx02", ["k8s-serving", "slurm-hpc"], "open")
    ]
    assert client.get("/api/v1/ledger/findings/", {"status": "closed"}).json()["count"] == 0
    assert client.get("/api/v1/ledger/findings/", {"orchestrator": "ray"}).json()["count"] == 0
    bad = client.get("/api/v1/ledger/findings/", {"kind": "nonsense"})
    assert bad.status_code == 400 and "kind" in bad.json()


def test_the_ownership_api_lists_intervals_with_their_end(api, with_double, rounds):
    rows = api("researcher").get("/api/v1/ledger/ownership/", {"node": "dgx01"}).json()["results"]
    assert [(r["orchestrator"], r["ended_at"] is None) for r in rows] == [("slurm-hpc", False), ("k8s-serving", True)]
    still = api("researcher").get("/api/v1/ledger/ownership/", {"open": "true", "node": "dgx02"}).json()
    assert still["count"] == 2


def test_an_alias_needs_a_reason_and_is_stored_with_its_author(api, cast, two_sources):
    client = api("admin")
    missing = client.post(
        "/api/v1/ledger/aliases/", {"orchestrator": "k8s-serving", "name": "n-1", "host": "dgx01"}, format="json"
    )
    assert missing.status_code == 400 and "reason" in missing.json()
    created = client.post(
        "/api/v1/ledger/aliases/",
        {"orchestrator": "k8s-serving", "name": "n-1", "host": "dgx01", "reason": "k8s names it by serial"},
        format="json",
    )
    assert created.status_code == 201, created.content
    alias = NodeAlias.objects.get(name="n-1")
    entry = alias.history.first()
    assert entry.history_user == cast["admin"] and entry.history_change_reason == "k8s names it by serial"
    twice = client.post(
        "/api/v1/ledger/aliases/",
        {"orchestrator": "k8s-serving", "name": "n-1", "host": "dgx02", "reason": "again"},
        format="json",
    )
    assert twice.status_code == 400


def test_a_host_with_malformed_gpu_uuids_is_refused_naming_the_field(api, db):
    response = api("admin").post(
        "/api/v1/ledger/hosts/", {"name": "h1", "gpu_total": 8, "gpu_uuids": [""], "reason": "r"}, format="json"
    )
    assert response.status_code == 400 and "gpu_uuids" in response.json()
    assert not FleetHost.objects.filter(name="h1").exists()


def test_the_ledger_page_shows_the_timeline_open_findings_and_history(client, cast, with_double, rounds):
    two_sources = with_double
    two_sources.slurm_owns.discard("dgx02")
    two_sources.round(rounds(2))
    two_sources.k8s_owns.add("dgx01")
    client.force_login(cast["researcher"])
    # the findings happened on 2026-12-01: pin the window there
    end = (rounds(3) + timedelta(hours=1)).isoformat()
    page = client.get(reverse("ledger"), {"range": "6h", "end": end})
    html = page.content.decode()
    assert page.status_code == 200
    assert "Who could schedule on each node" in html and "ownership-timeline" in html
    closed_section = html.split('id="closed-findings"')[1]
    assert "dgx02" in closed_section and "Double ownership" in closed_section
    assert "No drift" in html.split('id="open-findings"')[1].split('id="closed-findings"')[0]


def test_the_overview_banner_names_an_open_high_severity_finding(client, cast, with_double):
    client.force_login(cast["researcher"])
    html = client.get(reverse("overview")).content.decode()
    banner = html.split('id="ledger-banner"')[1].split("</div>")[0]
    assert "Double ownership" in banner and "dgx02" in banner


def test_metrics_have_a_gauge_per_finding_kind(client, with_double, settings):
    settings.METRICS_TOKEN = "t"  # /metrics needs it or an admin (tests/security)
    text = client.get("/metrics", HTTP_AUTHORIZATION="Bearer t").content.decode()
    assert 'gpuportal_ledger_findings_open{kind="double_ownership"} 1.0' in text
    assert 'gpuportal_ledger_findings_open{kind="orphan"} 0.0' in text
    assert text.count("gpuportal_ledger_findings_open{") == len(LedgerFinding.Kind.values)


def test_the_healthy_demo_federation_shows_no_finding_through_its_rounds_and_a_rebalance(cast, settings):
    # Demo rounds run ahead of the wall clock that stamps the plan's steps, so a drain waiting for jobs to
    # end looks hours old to the ledger: give it a timeout that only a really lost step would pass.
    settings.GPUPORTAL_REBALANCE = {"drain_timeout_s": 86400}
    from scheduling.models import Orchestrator as Orch
    from scheduling.models import PoolPolicy, RebalancePlan
    from scheduling.services import rebalance

    demo.create_demo_federation()
    demo.fill_history(days=0.1, step_s=600)
    now = timezone.now()
    for minute in range(0, 40, 2):  # longer than the 15-minute orphan setting
        demo.run_demo_round(now + timedelta(minutes=minute))
    assert LedgerFinding.objects.count() == 0
    assert ledger.evaluate(now + timedelta(minutes=40)).open_total == 0
    PoolPolicy.objects.create(
        orchestrator=Orch.objects.get(name="ray-sweeps"),
        name="sweeps",
        weekdays=list(range(1, 8)),
        start_time="00:00",
        end_time="00:00",
        floor_gpus=96,
    )
    plan = rebalance.propose_plan().plan
    rebalance.approve_plan(plan, by=cast["admin"], reason="demo ledger")
    at = now + timedelta(minutes=40)
    for _step in range(1, 60):
        outcome = rebalance.apply_step(plan.pk)
        if outcome.finished:
            break
        at += timedelta(minutes=10)  # demo time moves on, so jobs on the draining nodes finish
        demo.run_demo_round(at)
    assert outcome.plan_state == RebalancePlan.State.APPLIED
    demo.run_demo_round(at + timedelta(minutes=2))
    assert list(LedgerFinding.objects.values_list("kind", "node")) == []


def test_a_time_with_an_impossible_utc_offset_is_a_400_naming_the_filter(api, db):
    response = api("researcher").get("/api/v1/ledger/findings/", {"since": "8177-02-15T02:23:23-21:56"})
    assert response.status_code == 400 and "since" in response.json()
    samples = api("researcher").get("/api/v1/usage/samples/", {"until": "2026-01-01T00:00:00+20:00"})
    assert samples.status_code == 400 and "until" in samples.json()


def test_deleting_an_alias_needs_a_reason_and_keeps_who_deleted_it(api, cast, two_sources):
    alias = NodeAlias.objects.create(orchestrator=two_sources.k8s, name="n-2", host=FleetHost.objects.get(name="dgx01"))
    client = api("admin")
    assert client.delete(f"/api/v1/ledger/aliases/{alias.pk}/").status_code == 400
    assert client.delete(f"/api/v1/ledger/aliases/{alias.pk}/?reason=renamed+back").status_code == 204
    gone = NodeAlias.history.filter(id=alias.pk, history_type="-").get()
    assert gone.history_user == cast["admin"] and gone.history_change_reason == "renamed back"
    assert api("researcher").delete(f"/api/v1/ledger/hosts/{FleetHost.objects.first().pk}/?reason=x").status_code == 403


def test_the_ledger_command_adopts_evaluates_and_prints_open_findings_as_json(two_sources, rounds):
    import json
    from io import StringIO

    from django.core.management import call_command

    FleetHost.objects.filter(name="dgx04").delete()
    two_sources.k8s_owns.add("dgx02")
    two_sources.scrape_slurm(timezone.now())
    two_sources.scrape_k8s(timezone.now())
    out = StringIO()
    call_command("ledger", "--adopt", "--evaluate", "--json", stdout=out)
    lines = out.getvalue().splitlines()
    assert lines[0] == "adopted 1 hosts: dgx04"
    assert lines[1].startswith("evaluated in ") and "1 open" in lines[1]
    (finding,) = [json.loads(line) for line in lines[2:]]
    assert finding["kind"] == "double_ownership" and finding["node"] == "dgx02"
