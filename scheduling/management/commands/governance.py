import json
import time

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from scheduling.services.enforcement import decisions as enforcement_decisions
from scheduling.services.enforcement import rounds as enforcement_rounds


def _report(outcome: enforcement_decisions.OrchestratorRound) -> dict[str, object]:
    """Counts per orchestrator, then the objects behind them (ids), then the error if the round failed there."""
    return {
        "mode": outcome.mode,
        "applied": len(outcome.applied),
        "unchanged": outcome.unchanged,
        "drifted": len(outcome.drifted),
        "failed": len(outcome.failed),
        "pending": len(outcome.pending),
        "objects": {
            "applied": outcome.applied,
            "drifted": outcome.drifted,
            "failed": outcome.failed,
            "pending": outcome.pending,
        },
        "error": outcome.error,
    }


class Command(BaseCommand):
    help = (
        "Enforce governance on the clusters (docs/governance.md): read back, diff, apply in auto mode or store a "
        "plan in review mode. Without --once, a round every GPUPORTAL_ROUND_SECONDS (the beat task does the same)."
    )

    def add_arguments(self, parser):
        parser.add_argument("--once", action="store_true", help="run one round and exit")
        parser.add_argument("--dry-run", action="store_true", help="diff only: write nothing, record nothing")
        parser.add_argument("--json", action="store_true", help="print the round per orchestrator as JSON")

    def handle(self, *args, once: bool, dry_run: bool, json: bool, **options):
        while True:
            try:
                outcomes = enforcement_rounds.reconcile(dry_run=dry_run)
            except enforcement_rounds.RoundInProgress as busy:  # one round at a time: the beat's or a triggered one
                if once:
                    raise CommandError(f"{busy}; try again once it is over") from busy
                self.stderr.write(f"skipped: {busy}")
                outcomes = []
            else:
                self._print(outcomes, as_json=json)
            if once:
                break
            time.sleep(settings.GPUPORTAL_ROUND_SECONDS)
        if any(o.error for o in outcomes) and not json:
            raise CommandError("governance round failed on " + ", ".join(o.orchestrator for o in outcomes if o.error))

    def _print(self, outcomes, *, as_json: bool) -> None:
        if as_json:
            self.stdout.write(json.dumps({o.orchestrator: _report(o) for o in outcomes}, indent=2))
            return
        if not outcomes:
            self.stdout.write("no governed orchestrator (real, enabled Slurm, Kubernetes or Ray)")
        for o in outcomes:
            self.stdout.write(
                f"{o.orchestrator} ({o.mode}): applied {len(o.applied)}, unchanged {o.unchanged}, "
                f"drifted {len(o.drifted)}, failed {len(o.failed)}, pending {len(o.pending)}"
                + (f"; error: {o.error}" if o.error else "")
            )
