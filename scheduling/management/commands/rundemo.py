"""Serve the portal with a background Celery worker (and beat) running collection and engine rounds."""

import os
import signal
import subprocess
import sys

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand


def _queues() -> str:
    """The demo's one worker serves every queue, scrapes' included (production runs a collector for those)."""
    return ",".join(q for q in ("celery", settings.GPUPORTAL_COLLECT_QUEUE) if q)


class Command(BaseCommand):
    help = "Run the web server on 127.0.0.1 plus a Celery worker with beat, for the embedded demo."

    def add_arguments(self, parser):
        parser.add_argument("--port", type=int, default=int(os.environ.get("PORT", "8000")))
        parser.add_argument("--host", default="127.0.0.1")

    def handle(self, *args, port: int, host: str, **options):
        worker = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "gpuportal",
                "worker",
                "--beat",
                "--pool=solo",
                "-Q",
                _queues(),
                "--loglevel=WARNING",
                "--schedule",
                settings.CELERY_BEAT_SCHEDULE_FILENAME,
            ],
            env=os.environ.copy(),
        )
        self.stdout.write(
            f"Celery worker + beat started (pid {worker.pid}); rounds every {settings.GPUPORTAL_ROUND_SECONDS}s.\n"
            f"Open http://{host}:{port}/ and log in as admin/admin, lead/lead, alice/alice or bob/bob."
        )
        try:
            call_command("runserver", f"{host}:{port}", use_reloader=False)
        finally:
            worker.send_signal(signal.SIGTERM)
            try:
                worker.wait(timeout=10)
            except subprocess.TimeoutExpired:
                worker.kill()
