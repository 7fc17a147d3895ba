"""The GPU ledger page: who could schedule on each node over time, open drift, its history."""

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from scheduling import charts
from scheduling.filters import LedgerFindingFilter
from scheduling.models import LedgerFinding
from scheduling.selectors import ledger as ledger_reads
from scheduling.tables import LedgerFindingTable

from .common import paginate, time_range
from .page_cache import served_while_unchanged

TIMELINE_RANGES = ("6h", "24h", "7d", "30d")


@login_required
@served_while_unchanged
def ledger(request: HttpRequest) -> HttpResponse:
    window = time_range(request, default="24h", allowed=TIMELINE_RANGES)
    finding_filter = LedgerFindingFilter(request.GET, queryset=ledger_reads.shown_findings(), request=request)
    rows = finding_filter.qs
    open_table = LedgerFindingTable(rows.filter(closed_at__isnull=True), prefix="o-", exclude=("closed_at",))
    paginate(request, open_table, 50)
    closed_table = LedgerFindingTable(rows.filter(closed_at__isnull=False), prefix="c-", order_by=("-closed_at",))
    paginate(request, closed_table, 25)
    nodes = ledger_reads.timeline_nodes(window.since, window.until)
    spans = ledger_reads.ownership_between(window.since, window.until, nodes=nodes)
    context = {
        "window": window,
        "filter": finding_filter,
        "open_table": open_table,
        "closed_table": closed_table,
        "counts": _counts_with_labels(),
        "status": ledger_reads.ledger_status(),
        "timeline": charts.ownership_timeline_chart(spans, window.since, window.until),
        "timeline_nodes": len(nodes),
    }
    return render(request, "scheduling/ledger.html", context)


def _counts_with_labels() -> list[tuple[str, str, int]]:
    counts = ledger_reads.open_counts_by_kind()
    return [(value, label, counts[value]) for value, label in LedgerFinding.Kind.choices]
