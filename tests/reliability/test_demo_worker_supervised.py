"""Issue 36 item 8: `make demo` brings a dead worker back (rundemo's Supervisor), with real processes."""

import subprocess
import sys
import time

from scheduling.management.commands.rundemo import Supervisor, worker_argv


def _sleeper() -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])


def test_a_killed_worker_is_started_again():
    said: list[str] = []
    supervisor = Supervisor(_sleeper, say=said.append, first_pause_s=0.1)
    try:
        first = supervisor.process
        first.kill()  # as a SIGKILL, or the worker's own "Unrecoverable error" exit
        deadline = time.monotonic() + 10
        while supervisor.process is first and time.monotonic() < deadline:
            time.sleep(0.05)
        assert supervisor.process is not first and supervisor.process.poll() is None
        assert supervisor.restarts == 1 and "exited with -9; starting it again" in said[0]
    finally:
        supervisor.stop()
    assert supervisor.process.poll() is not None  # stop() ends the child it holds


def test_a_worker_that_cannot_start_is_retried_with_growing_pauses():
    said: list[str] = []
    failing = lambda: subprocess.Popen([sys.executable, "-c", "raise SystemExit(1)"])  # noqa: E731
    supervisor = Supervisor(failing, say=said.append, first_pause_s=0.05, max_pause_s=0.2)
    try:
        deadline = time.monotonic() + 10
        while supervisor.restarts < 4 and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        supervisor.stop()
    pauses = [float(line.rsplit(" in ", 1)[1].split(" s")[0]) for line in said[:4]]
    assert pauses == [0.05, 0.1, 0.2, 0.2]


def test_the_demo_worker_serves_the_scrape_queue_too(settings):
    argv = worker_argv()
    assert argv[argv.index("-Q") + 1] == "celery,collect"
