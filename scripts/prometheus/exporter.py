#!/usr/bin/env python3
"""A DCGM-exporter stand-in: serves NVIDIA dcgm-exporter's text format for fixture nodes (stdlib only).

The real exporter needs GPUs; tests and demos need known values. This one reads a JSON script:

    {"nodes": [{"hostname": "dgx00", "model": "NVIDIA H100 80GB HBM3",
                "gpus": [{"util": 100}, {"util": [[0, 80], [30, 0]], "hpc_job": "101"},
                         {"util": 60, "namespace": "nlp", "pod": "train-0"}]}]}

``util`` is a percent, or ``[[seconds since start, percent], ...]`` steps (piecewise constant), so the
busy GPU-seconds a scrape window holds are known exactly. The script is re-read when its file changes.

    python3 exporter.py --config script.json --port 19400 [--host 127.0.0.1]
"""

from __future__ import annotations

import argparse
import json
import os
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

METRICS = (
    ("DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %).", lambda u: round(u)),
    ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "Ratio of time the graphics engine is active.", lambda u: u / 100),
    ("DCGM_FI_DEV_FB_USED", "Framebuffer memory used (in MiB).", lambda u: round(800 * u)),
    ("DCGM_FI_DEV_POWER_USAGE", "Power draw (in W).", lambda u: 70 + 6.3 * u),
)


class Script:
    """The JSON script, re-read when its modification time changes."""

    def __init__(self, path: str) -> None:
        self.path, self.mtime, self.nodes = path, 0.0, []
        self.started = time.time()

    def current(self) -> list[dict]:
        mtime = os.stat(self.path).st_mtime
        if mtime != self.mtime:
            with open(self.path) as handle:
                self.nodes = json.load(handle)["nodes"]
            self.mtime = mtime
        return self.nodes


def utilisation(spec: float | list, elapsed: float) -> float:
    if not isinstance(spec, list):
        return float(spec)
    value = 0.0
    for since, percent in spec:
        if elapsed >= since:
            value = float(percent)
    return value


def labels(node: dict, index: int, gpu: dict) -> str:
    pairs = {
        "gpu": str(index),
        "UUID": gpu.get("uuid") or f"GPU-{node['hostname']}-{index:04d}",
        "device": f"nvidia{index}",
        "modelName": node.get("model", "NVIDIA H100 80GB HBM3"),
        "Hostname": node["hostname"],
    }
    for key in ("hpc_job", "namespace", "pod", "container"):
        if gpu.get(key):
            pairs[key] = str(gpu[key])
    return ",".join(f'{k}="{v}"' for k, v in pairs.items())


def exposition(nodes: list[dict], elapsed: float) -> str:
    lines = []
    for metric, help_text, convert in METRICS:
        lines += [f"# HELP {metric} {help_text}", f"# TYPE {metric} gauge"]
        for node in nodes:
            for index, gpu in enumerate(node["gpus"]):
                value = convert(utilisation(gpu.get("util", 0), elapsed))
                lines.append(f"{metric}{{{labels(node, index, gpu)}}} {value}")
    return "\n".join(lines) + "\n"


def handler_for(script: Script) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path.split("?")[0] != "/metrics":
                self.send_error(404)
                return
            body = exposition(script.current(), time.time() - script.started).encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:  # one scrape a second would flood the log
            pass

    return Handler


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", required=True)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=19400)
    args = parser.parse_args()
    server = ThreadingHTTPServer((args.host, args.port), handler_for(Script(args.config)))
    server.serve_forever()


if __name__ == "__main__":
    main()
