"""The WSGI entry point freezes what is loaded at startup, so full collections scan only what requests make."""

from __future__ import annotations

import subprocess
import sys


def test_loading_the_wsgi_application_freezes_the_startup_heap() -> None:
    probe = "import gc; import gpuportal.wsgi; print(gc.get_freeze_count())"
    env = {"DJANGO_SETTINGS_MODULE": "gpuportal.settings", "DEBUG": "1", "PATH": "/usr/bin:/bin"}
    frozen = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, check=True,
                            timeout=120)
    assert int(frozen.stdout.split()[-1]) > 10_000  # Django, the apps and every view
