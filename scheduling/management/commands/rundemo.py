"""Serve the portal with a background Celery worker (and beat) running collection and engine rounds.

The worker is supervised: one that exits (issue 36: kombu 5.7.0's Redis transport can end the worker with
``Unrecoverable error: AttributeError ... 'hostname'`` after Redis is killed, see docs/operations.md) is
started again after a short, growing pause, as compose (``restart: unless-stopped``) and Kubernetes
(Deployments) do in production.
"""

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable

from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand


def _queues() -> str:
    """The demo's one worker serves every queue, scrapes' included (production runs a collector for those)."""
    return ",".join(q for q in ("celery", settings.GPUPORTAL_COLLECT_QUEUE) if q)


def worker_argv() -> list[str]:
    return [
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
    ]


class Supervisor:
    """Keep one child process running: start it, and start it again whenever it exits until ``stop()``.

    Pauses between restarts double from ``first_pause_s`` to ``max_pause_s`` (a worker that cannot start
    at all must not spin), and reset once a child has run for ``settled_s``."""

    def __init__(
        self,
        start: Callable[[], subprocess.Popen],
        *,
        say: Callable[[str], None] = print,
        first_pause_s: float = 1.0,
        max_pause_s: float = 30.0,
        settled_s: float = 60.0,
    ) -> None:
        self._start, self._say = start, say
        self.first_pause_s, self.max_pause_s, self.settled_s = first_pause_s, max_pause_s, settled_s
        self._stopping = threading.Event()
        self.restarts = 0
        self.process = start()
        self._thread = threading.Thread(target=self._watch, name="worker-supervisor", daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        pause, started = self.first_pause_s, time.monotonic()
        while not self._stopping.is_set():
            code = self.process.poll()
            if code is None:
                self._stopping.wait(0.5)
                continue
            if time.monotonic() - started >= self.settled_s:
                pause = self.first_pause_s
            self._say(f"Celery worker (pid {self.process.pid}) exited with {code}; starting it again in {pause:g} s.")
            if self._stopping.wait(pause):
                return
            self.process, started = self._start(), time.monotonic()
            self.restarts += 1
            pause = min(pause * 2, self.max_pause_s)

    def stop(self, timeout: float = 10.0) -> None:
        self._stopping.set()
        self._thread.join(timeout)
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()


class Command(BaseCommand):
    help = "Run the web server on 127.0.0.1 plus a supervised Celery worker with beat, for the embedded demo."

    def add_arguments(self, parser):
        parser.add_argument("--port", type=int, default=int(os.environ.get("PORT", "8000")))
        parser.add_argument("--host", default="127.0.0.1")

    def handle(self, *args, port: int, host: str, **options):
        supervisor = Supervisor(
            lambda: subprocess.Popen(worker_argv(), env=os.environ.copy()),
            say=lambda text: self.stderr.write(text),
        )
        self.stdout.write(
            f"Celery worker + beat started (pid {supervisor.process.pid}, restarted if it exits); rounds every "
            f"{settings.GPUPORTAL_ROUND_SECONDS}s.\n"
            f"Open http://{host}:{port}/ and log in as admin/admin, lead/lead, alice/alice or bob/bob."
        )
        try:
            call_command("runserver", f"{host}:{port}", use_reloader=False)
        finally:
            supervisor.stop()
