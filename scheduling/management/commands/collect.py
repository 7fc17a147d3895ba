from json import dumps

from django.core.management.base import BaseCommand, CommandError

from scheduling.models import Orchestrator
from scheduling.services import collection, demo, fragmentation


class Command(BaseCommand):
    help = "Run one collection round synchronously over every enabled orchestrator."

    def add_arguments(self, parser):
        parser.add_argument("--once", action="store_true", help="one round, then exit (the only mode)")
        parser.add_argument("--json", action="store_true", help="print one JSON object per orchestrator")
        parser.add_argument("--name", help="only this orchestrator")

    def handle(self, *args, once: bool, json: bool, name: str | None, **options):
        orchestrators = Orchestrator.objects.filter(enabled=True)
        if name:
            orchestrators = orchestrators.filter(name=name)
            if not orchestrators.exists():
                raise CommandError(f"--name: no enabled orchestrator called {name!r}")
        if any(o.endpoint.startswith(demo.DEMO_PREFIX) for o in orchestrators):
            demo.run_demo_round()
        for orchestrator in orchestrators.exclude(endpoint__startswith=demo.DEMO_PREFIX):
            collection.scrape(orchestrator.pk)
        fragmentation.record_fragmentation_sample()
        for row in (_summary(o) for o in orchestrators.order_by("name")):
            self.stdout.write(dumps(row) if json else _line(row))


def _summary(orchestrator: Orchestrator) -> dict:
    orchestrator.refresh_from_db()
    run = orchestrator.runs.filter(ok=True).first()
    return {
        "name": orchestrator.name,
        "kind": orchestrator.kind,
        "nodes": run.nodes if run else 0,
        "gpus_total": run.gpus_total if run else 0,
        "gpus_allocated": run.gpus_allocated if run else 0,
        "workloads_running": run.workloads_running if run else 0,
        "workloads_pending": run.workloads_pending if run else 0,
        "pending_gpus": run.pending_gpus if run else 0,
        "stale": orchestrator.is_stale,
        "error": orchestrator.last_error if orchestrator.is_stale else "",
    }


def _line(row: dict) -> str:
    state = f"STALE ({row['error']})" if row["stale"] else "fresh"
    gpus = f"{row['gpus_allocated']}/{row['gpus_total']} GPUs allocated"
    work = f"{row['workloads_running']} running, {row['workloads_pending']} pending ({row['pending_gpus']} GPUs)"
    return f"{row['name']} [{row['kind']}]: {row['nodes']} nodes, {gpus}, {work} - {state}"
