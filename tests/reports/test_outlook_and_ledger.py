"""The report's outlook (the demand forecast turned into guarantee dates) and its GPU ledger section."""

from datetime import UTC, datetime, timedelta

import pytest

from scheduling.models import LedgerFinding, UsageRollup
from scheduling.reports import documents as reports
from scheduling.reports.capacity import Window
from scheduling.services.report_delivery import report_content

pytestmark = pytest.mark.django_db

END = datetime(2026, 11, 30, tzinfo=UTC)  # a Monday
WEEK = Window(END - timedelta(days=7), END, "UTC")


def _record_growth(orchestrator, team, *, start_gpus: float, per_day: float, weeks: int = 3) -> None:
    """Hourly rollups for ``team``: demand rising linearly by ``per_day`` GPUs a day up to the week's end."""
    hours = weeks * 168
    start = END - timedelta(hours=hours)
    rows = []
    for h in range(hours):
        gpus = start_gpus + per_day * h / 24
        for owner in (None, team):
            rows.append(
                UsageRollup(
                    resolution="hour",
                    period_start=start + timedelta(hours=h),
                    orchestrator=orchestrator,
                    team=owner,
                    gpu_s_total=64 * 3600,
                    gpu_s_allocated=gpus * 3600,
                    covered_s=3600,
                )
            )
    UsageRollup.objects.bulk_create(rows)


def test_a_team_running_out_of_its_guarantee_gets_a_dated_outlook_and_a_high_action(orchestrator, teams, queues):
    # nlp's guarantee is 8 GPUs; demand reaches 6.5 at the week's end, growing 0.3 GPU a day: 5 days left.
    # Its parent research (guarantee 16) carries the same demand: about 32 days left, a medium action.
    _record_growth(orchestrator, teams["nlp"], start_gpus=6.5 - 0.3 * 21, per_day=0.3)
    content = report_content(WEEK)
    nlp = next(row for row in content["sections"]["outlook"]["teams"] if row["team"] == "nlp")
    assert nlp["trend_per_day"] == pytest.approx(0.3, abs=0.03)
    assert 4 <= nlp["days_left"] <= 6
    assert nlp["exhausted_on"] == (END.date() + timedelta(days=nlp["days_left"])).isoformat()
    actions = [a for a in content["sections"]["trend"]["actions"] if a["rule"] == "guarantee-exhaustion"]
    assert [a["severity"] for a in actions] == ["high", "medium"]
    assert "NLP" in actions[0]["text"] and nlp["exhausted_on"] in actions[0]["text"]
    assert "Research" in actions[1]["text"]
    html = reports.render_html(content, scope=None)
    assert nlp["sentence"] in html


def test_flat_demand_far_below_the_guarantee_suggests_nothing(orchestrator, teams, queues):
    _record_growth(orchestrator, teams["production"], start_gpus=6, per_day=0)
    content = report_content(WEEK)
    production = next(row for row in content["sections"]["outlook"]["teams"] if row["team"] == "production")
    assert production["days_left"] is None and "does not exhaust" in production["sentence"]
    assert not [a for a in content["sections"]["trend"]["actions"] if a["rule"] == "guarantee-exhaustion"]


def _finding(kind, severity, node, opened, closed=None):
    return LedgerFinding.objects.create(
        key=f"{kind}:{node}",
        kind=kind,
        severity=severity,
        node=node,
        orchestrators="slurm-a,k8s",
        explanation=f"{node} is schedulable in slurm-a and k8s at once.",
        first_seen=opened,
        last_seen=closed or END,
        opened_at=opened,
        closed_at=closed,
    )


def test_the_ledger_section_counts_hours_open_inside_the_week_and_flags_what_is_still_open(db):
    start = WEEK.start
    _finding("double_ownership", "high", "dgx01", start + timedelta(hours=10), start + timedelta(hours=12, minutes=30))
    _finding("double_ownership", "high", "dgx02", END - timedelta(hours=3))  # still open at the end
    _finding("orphan", "medium", "dgx03", start - timedelta(days=2), start + timedelta(hours=1))  # began before
    _finding("orphan", "medium", "dgx04", start - timedelta(days=3), start - timedelta(days=1))  # outside the week
    content = report_content(WEEK)
    kinds = {k["kind"]: k for k in content["sections"]["ledger"]["kinds"]}
    assert kinds["double_ownership"]["findings"] == 2
    assert kinds["double_ownership"]["open_h"] == pytest.approx(2.5 + 3)
    assert kinds["double_ownership"]["open_at_end"] == 1
    assert kinds["orphan"] == {
        "kind": "orphan",
        "label": "Orphan (owned by none)",
        "findings": 1,
        "open_h": 1.0,
        "open_at_end": 0,
    }
    assert [f["node"] for f in content["sections"]["ledger"]["findings"]] == ["dgx02", "dgx01", "dgx03"]
    drift = [a for a in content["sections"]["trend"]["actions"] if a["rule"] == "ledger-drift"]
    assert [a["severity"] for a in drift] == ["high"]
    assert drift[0]["text"].startswith("1 double ownership finding was still open")
    html = reports.render_html(content, scope=None)
    assert "dgx02 is schedulable in slurm-a and k8s at once." in html
    assert "ledger,double_ownership,open_h,5.5,hours" in reports.render_csv(content, scope=None)
