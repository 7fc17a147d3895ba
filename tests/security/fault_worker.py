"""Run a real Celery worker; with FAULT_GATE_DIR set, the what-if simulator stops at its first progress
report, and a capacity report build before it computes (after writing ``paused``), until ``release``
appears there, and a failed task writes ``failed``
there, so a test can cut the database or kill the worker mid-run. Nothing else changes: the task, the
service and the database writes are the real ones.
"""

import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
GATE_WAIT_S = 120.0


def _install_gate(folder: Path) -> None:
    from scheduling.services import whatif

    real = whatif.run_whatif

    def gated(inputs, progress=None):
        def report(done: int, total: int) -> None:
            if progress is not None:
                progress(done, total)
            if done and not (folder / "paused").exists():
                (folder / "paused").write_text(str(os.getpid()))
                deadline = time.monotonic() + GATE_WAIT_S
                while not (folder / "release").exists() and time.monotonic() < deadline:
                    time.sleep(0.05)

        return real(inputs, report)

    whatif.run_whatif = gated
    _gate_report_builds(folder)

    from celery.signals import task_failure

    @task_failure.connect(weak=False)
    def note_failure(sender=None, exception=None, **kwargs) -> None:
        # The what-if's halves run as their own tasks (a chord): a test waits for this file to know one failed.
        (folder / "failed").write_text(f"{sender.name}: {type(exception).__name__}")


def _gate_report_builds(folder: Path) -> None:
    from scheduling.services import report_delivery

    real = report_delivery.report_content

    def gated(window):
        if not (folder / "paused").exists():
            (folder / "paused").write_text(str(os.getpid()))
            deadline = time.monotonic() + GATE_WAIT_S
            while not (folder / "release").exists() and time.monotonic() < deadline:
                time.sleep(0.05)
        return real(window)

    report_delivery.report_content = gated


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gpuportal.settings_test")
    import django

    django.setup()
    if os.environ.get("FAULT_GATE_DIR"):
        _install_gate(Path(os.environ["FAULT_GATE_DIR"]))
    from gpuportal.celery import app

    app.worker_main(sys.argv[1:])


if __name__ == "__main__":
    main()
