"""A real Prometheus (Debian's) scraping our DCGM-format exporter every second, for the whole session.

Started by ``scripts/prometheus/start.sh`` on free loopback ports with its own storage under /tmp;
skipped with a reason when prometheus is not installed, a failure under CI=true (CI installs it with
``scripts/ci/install-prometheus.sh``).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support import require

REPO = Path(__file__).resolve().parents[2]
SCRIPTS = REPO / "scripts" / "prometheus"

# Known busy percentages per GPU: the expected busy GPU-seconds of any window follow exactly.
FLEET = {
    "nodes": [
        {"hostname": "dgx00", "gpus": [{"util": 100}, {"util": 50}, {"util": 2}, {"util": 0}]},
        {"hostname": "dgx01", "gpus": [{"util": 80}, {"util": 80}, {"util": 0}, {"util": 0}]},
        {
            "hostname": "k8s00",
            "gpus": [{"util": 60, "namespace": "vision", "pod": "serve-0"}, {"util": 0}, {"util": 0}, {"util": 30}],
        },
        {"hostname": "ghost01", "gpus": [{"util": 40}]},
    ]
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class LivePrometheus:
    url: str
    env: dict[str, str]
    started_at: float

    def stop(self) -> None:
        subprocess.run([str(SCRIPTS / "stop.sh")], env=self.env, check=True, capture_output=True)

    def start(self) -> None:
        """Start again on the same ports; the TSDB is kept, so the history survives the outage."""
        _launch({**self.env, "KEEP_DATA": "1"})

    def wait_until(self, moment: float) -> None:
        """Sleep until ``moment`` (epoch seconds) has been scraped."""
        delay = moment - time.time()
        if delay > 0:
            time.sleep(delay)


def _launch(env: dict[str, str]) -> str:
    done = subprocess.run([str(SCRIPTS / "start.sh")], env=env, check=True, capture_output=True, text=True, timeout=60)
    values = dict(line.split("=", 1) for line in done.stdout.splitlines() if "=" in line)
    return values["PROMETHEUS_URL"]


@pytest.fixture(scope="session")
def live_prometheus():
    require(shutil.which("prometheus") is not None, "needs prometheus (scripts/prometheus/install.sh)")
    state = tempfile.mkdtemp(prefix="gpuportal-prometheus-")
    config = Path(state) / "fleet.json"
    config.write_text(json.dumps(FLEET))
    env = {
        **os.environ,
        "PROM_STATE_DIR": f"{state}/run",
        "PROM_PORT": str(free_port()),
        "EXPORTER_PORT": str(free_port()),
        "EXPORTER_CONFIG": str(config),
        "SCRAPE_INTERVAL": "1s",
    }
    url = _launch(env)
    live = LivePrometheus(url, env, time.time())
    yield live
    live.stop()
    shutil.rmtree(state, ignore_errors=True)
