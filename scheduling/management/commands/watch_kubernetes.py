import signal
import threading
import time

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from scheduling.services import kubernetes_watch


class Command(BaseCommand):
    help = (
        "Watch the Kubernetes orchestrators (list once, then follow watches) and run their collection rounds from "
        "the watch cache; the Celery round leaves them alone while this runs (docs/performance.md)."
    )

    def add_arguments(self, parser):
        parser.add_argument("--name", action="append", default=[], help="only this orchestrator (repeatable)")
        parser.add_argument("--interval", type=float, default=None, help="seconds between rounds (default: beat's)")
        parser.add_argument("--rounds", type=int, default=0, help="stop after this many rounds (0: run until stopped)")

    def handle(self, *args, name: list[str], interval: float | None, rounds: int, **options):
        interval = interval or float(settings.GPUPORTAL_ROUND_SECONDS)
        try:
            sources = kubernetes_watch.watched_sources(name)
        except ValueError as error:
            raise CommandError(str(error)) from error
        if not sources:
            raise CommandError("no enabled Kubernetes orchestrator to watch")
        stop = threading.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: stop.set())
        watchers = {o.pk: kubernetes_watch.start_watch(o) for o in sources}
        try:
            done = 0
            while not stop.is_set() and (not rounds or done < rounds):
                started = time.monotonic()
                for orchestrator in sources:
                    outcome = kubernetes_watch.watched_round(orchestrator, watchers[orchestrator.pk], interval)
                    self.stdout.write(_line(outcome, watchers[orchestrator.pk]))
                done += 1
                if not rounds or done < rounds:
                    stop.wait(max(interval - (time.monotonic() - started), 0.0))
        finally:
            for watching in watchers.values():
                watching.stop()
            kubernetes_watch.unmark(sources)


def _line(outcome, watching) -> str:
    run = outcome.run
    if run is None:
        return f"{outcome.orchestrator}: skipped ({outcome.skipped})"
    how = "from the watch cache" if watching.synced else "re-listed (watch not synced)"
    state = "ok" if run.ok else f"FAILED ({run.error})"
    return f"{outcome.orchestrator}: {run.nodes} nodes, {run.workloads_running} running, {how}, {state}"
