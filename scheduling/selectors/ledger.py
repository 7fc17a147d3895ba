"""Reads of the GPU ledger for pages, the API, /metrics and the weekly report (plain data out)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.db.models import Count, Q, QuerySet

from scheduling.models import LedgerFinding, LedgerRound, OwnershipInterval


def shown_findings() -> QuerySet[LedgerFinding]:
    """Open and closed findings; pending ones (still inside their grace) are not drift yet."""
    return LedgerFinding.objects.filter(opened_at__isnull=False)


def open_findings() -> QuerySet[LedgerFinding]:
    return shown_findings().filter(closed_at__isnull=True)


def high_severity_open(limit: int = 5) -> list[LedgerFinding]:
    """What the overview's banner lists."""
    return list(open_findings().filter(severity=LedgerFinding.Severity.HIGH).order_by("opened_at")[:limit])


def open_counts_by_kind() -> dict[str, int]:
    """Open findings per kind, every kind present (a Prometheus gauge per kind reads 0, not nothing)."""
    counts = dict.fromkeys(LedgerFinding.Kind.values, 0)
    for row in open_findings().values("kind").annotate(n=Count("pk")):
        counts[row["kind"]] = row["n"]
    return counts


@dataclass(frozen=True)
class OwnershipSpan:
    node: str
    orchestrator: str
    start: datetime
    end: datetime | None


def ownership_between(since: datetime, until: datetime, *, nodes: list[str] | None = None) -> list[OwnershipSpan]:
    rows = OwnershipInterval.objects.filter(
        Q(started_at__lt=until) & (Q(ended_at__isnull=True) | Q(ended_at__gt=since))
    )
    if nodes is not None:
        rows = rows.filter(node__in=nodes)
    return [
        OwnershipSpan(node, orchestrator, start, end)
        for node, orchestrator, start, end in rows.order_by("node", "started_at").values_list(
            "node", "orchestrator__name", "started_at", "ended_at"
        )
    ]


def timeline_nodes(since: datetime, until: datetime, *, limit: int = 60) -> list[str]:
    """The nodes worth a row on the timeline: those with findings in the window first, then the rest."""
    flagged = list(
        findings_overlapping(since, until).order_by("node").values_list("node", flat=True).distinct()[:limit]
    )
    rest = (
        OwnershipInterval.objects.filter(started_at__lt=until)
        .exclude(node__in=flagged)
        .order_by("node")
        .values_list("node", flat=True)
        .distinct()
    )
    return flagged + list(rest[: max(limit - len(flagged), 0)])


def findings_overlapping(since: datetime, until: datetime) -> QuerySet[LedgerFinding]:
    return shown_findings().filter(Q(opened_at__lt=until) & (Q(closed_at__isnull=True) | Q(closed_at__gte=since)))


@dataclass(frozen=True)
class FindingRecord:
    """One finding as the weekly report shows it: how long it was open inside the report's window."""

    kind: str
    kind_label: str
    severity: str
    node: str
    orchestrators: tuple[str, ...]
    explanation: str
    opened_at: datetime
    closed_at: datetime | None
    open_seconds_in_window: float


def ledger_findings_between(since: datetime, until: datetime) -> list[FindingRecord]:
    """Every finding open at some moment of [since, until), most severe and longest first."""
    order = {"high": 0, "medium": 1, "low": 2}
    records = []
    for row in findings_overlapping(since, until):
        assert row.opened_at is not None  # shown findings are opened
        start, end = max(row.opened_at, since), min(row.closed_at or until, until)
        records.append(
            FindingRecord(
                kind=row.kind,
                kind_label=row.get_kind_display(),
                severity=row.severity,
                node=row.node,
                orchestrators=row.orchestrator_names,
                explanation=row.explanation,
                opened_at=row.opened_at,
                closed_at=row.closed_at,
                open_seconds_in_window=max((end - start).total_seconds(), 0.0),
            )
        )
    return sorted(records, key=lambda r: (order.get(r.severity, 3), -r.open_seconds_in_window, r.node))


@dataclass(frozen=True)
class LedgerStatus:
    evaluated_at: datetime | None
    duration_ms: int
    hosts: int
    stale_sources: tuple[str, ...]


def ledger_status() -> LedgerStatus:
    row = LedgerRound.objects.filter(pk=1).first()
    if row is None:
        return LedgerStatus(None, 0, 0, ())
    stale = tuple(s for s in row.stale_sources.split(",") if s)
    return LedgerStatus(row.evaluated_at, row.duration_ms, row.hosts, stale)
