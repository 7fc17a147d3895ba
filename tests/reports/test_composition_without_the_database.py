"""The report's composition is arithmetic over what it is handed (issue 34 item 5): ``reports/capacity.py`` runs
every section, the trend's recomputed previous week included, from a plain-data stand-in for
``selectors.report.WeekReads``, with the database closed (no ``django_db`` mark: any query would raise).
"""

from __future__ import annotations

from dataclasses import fields
from datetime import UTC, datetime, timedelta

import pytest

from scheduling.models import Team, TeamTree
from scheduling.reports.capacity import SECTIONS, Window, build_report
from scheduling.selectors.report import Interval, PoolSeconds, QueueVersion, QuotaFacts, SourceRuns, WeekReads

START = datetime(2026, 11, 16, tzinfo=UTC)
WEEK = Window(START, START + timedelta(days=7), "UTC")
HOUR = 3600.0


class PlainWeek:
    """One Slurm pool of 64 GPUs all week, 48 of them held; team "nlp" (guaranteed 32) holds 40 GPUs for the
    whole of any week it is asked about, user "ana" 8 of them in the first 24 hours."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, datetime]] = []

    def outlook(self, at: datetime) -> list:
        return []

    def source_runs(self, since: datetime, until: datetime) -> list[SourceRuns]:
        self.asked.append(("source_runs", since))
        return [SourceRuns("slurm-a", "slurm", since - timedelta(minutes=1), [(since + timedelta(hours=h), True)
                                                                              for h in range(168)])]

    def recorded_anything(self, since: datetime, until: datetime) -> bool:
        return True

    def pool_seconds(self, since: datetime, until: datetime) -> list[PoolSeconds]:
        week = (until - since).total_seconds()
        return [PoolSeconds("slurm-a", "slurm", 64 * week, 48 * week, 0.0, 0.0, 0.0, None, week)]

    def pool_hours_owned(self, since: datetime, until: datetime) -> dict:
        return {}

    def team_tree(self) -> TeamTree:
        return TeamTree.of([Team(pk=1, slug="nlp", name="NLP", parent_id=None)])

    def held_intervals(self, since: datetime, until: datetime) -> list[Interval]:
        return [
            Interval(1, "bo", "slurm-a", 32, since, until),
            Interval(1, "ana", "slurm-a", 8, since, since + timedelta(hours=24)),
            Interval(1, "cy", "slurm-a", 8, since + timedelta(hours=24), until),
        ]

    def efficiency_by_team(self, since: datetime, until: datetime) -> list:
        return []

    def queue_change_moments(self, since: datetime, until: datetime) -> list[datetime]:
        return []

    def queues_as_of(self, moment: datetime) -> dict[int, QueueVersion]:
        return {1: QueueVersion(1, 100.0, 32, 48)}

    def policy_history_starts(self) -> datetime | None:
        return None

    def started_wait_stats(self, since: datetime, until: datetime) -> tuple[list, dict]:
        return [], {}

    def pending_reasons(self, since: datetime, until: datetime) -> list:
        return [("slurm-a", "no 16 free GPUs", 16), ("slurm-a", "no 8 free GPUs", 8)]

    def fragmentation_trend(self, since: datetime, until: datetime, points: int) -> list:
        return []

    def pool_rule_set_as_of(self, moment: datetime) -> list:
        return []

    def moves_done(self, since: datetime, until: datetime) -> list:
        return []

    def plans_by_state(self, since: datetime, until: datetime) -> dict[str, int]:
        return {}

    def quota_facts(self, since: datetime, until: datetime, expiring_until: datetime) -> QuotaFacts:
        return QuotaFacts([], [], [])

    def ledger_findings_between(self, since: datetime, until: datetime) -> list:
        return []

    def previous_content(self, period_start: datetime) -> dict | None:
        return None


def test_the_stand_in_offers_every_read_the_sections_make():
    """``WeekReads`` (the real one) and the stand-in name the same reads: a read added to one is added to both."""
    public = {name for name in dir(PlainWeek) if not name.startswith("_")}
    offered = {name for name in dir(WeekReads) if not name.startswith("_")} | {f.name for f in fields(WeekReads)}
    assert public == offered


def test_a_week_is_composed_from_plain_reads_alone():
    reads = PlainWeek()
    content = build_report(WEEK, reads)

    fleet = content["sections"]["capacity"]["fleet"]
    assert (fleet["capacity_h"], fleet["allocated_h"], fleet["idle_h"]) == (64 * 168, 48 * 168, 16 * 168)
    assert fleet["allocation_pct"] == pytest.approx(75.0)
    (nlp,) = content["sections"]["teams"]["teams"]
    assert (nlp["used_h"], nlp["guaranteed_h"], nlp["burst_h"]) == (40 * 168, 32 * 168, 8 * 168)
    assert [u["user"] for u in nlp["top_users"]] == ["bo", "cy", "ana"]  # 5,376, 1,152 and 192 GPU-h
    assert content["sections"]["waits"]["pending_reasons"] == [
        {"reason": "no N free GPUs", "workloads": 2, "gpus": 24, "orchestrators": ["slurm-a"]}
    ]
    assert content["order"] == [section.key for section in SECTIONS]


def test_the_trend_recomputes_the_week_before_from_the_same_reads():
    reads = PlainWeek()
    trend = build_report(WEEK, reads)["sections"]["trend"]

    assert trend["previous_source"] == "recomputed"
    assert ("source_runs", WEEK.start - timedelta(days=7)) in reads.asked  # the previous week, asked of the reads
    allocation = next(row for row in trend["rows"] if row["key"] == "allocation_pct")
    assert (allocation["current"], allocation["previous"], allocation["change"]) == (75.0, 75.0, 0.0)
