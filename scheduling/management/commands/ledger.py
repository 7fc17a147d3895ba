from json import dumps

from django.core.management.base import BaseCommand

from scheduling.selectors import ledger as ledger_reads
from scheduling.services import ledger


class Command(BaseCommand):
    help = "The GPU ledger: adopt the nodes the orchestrators report into the inventory, evaluate, list findings."

    def add_arguments(self, parser):
        parser.add_argument(
            "--adopt",
            action="store_true",
            help="add every GPU node a source lists but the inventory lacks (first install; audited)",
        )
        parser.add_argument("--reason", default="adopted with manage.py ledger --adopt")
        parser.add_argument("--evaluate", action="store_true", help="run one ledger evaluation now")
        parser.add_argument("--json", action="store_true", help="print the open findings as JSON lines")

    def handle(self, *args, adopt: bool, reason: str, evaluate: bool, json: bool, **options):
        if adopt:
            hosts = ledger.adopt_hosts(reason=reason)
            self.stdout.write(f"adopted {len(hosts)} hosts: {', '.join(h.name for h in hosts) or 'none'}")
        if evaluate:
            outcome = ledger.evaluate()
            self.stdout.write(
                f"evaluated in {outcome.duration_ms} ms: {outcome.open_total} open, opened {len(outcome.opened)}, "
                f"closed {len(outcome.closed)}; stale: {', '.join(outcome.stale_sources) or 'none'}"
            )
        for finding in ledger_reads.open_findings().order_by("severity", "node"):
            row = {
                "kind": finding.kind,
                "severity": finding.severity,
                "node": finding.node,
                "orchestrators": finding.orchestrators,
                "opened_at": finding.opened_at.isoformat() if finding.opened_at else None,
                "explanation": finding.explanation,
            }
            line = dumps(row) if json else f"[{finding.severity}] {finding.get_kind_display()}: {finding.explanation}"
            self.stdout.write(line)
