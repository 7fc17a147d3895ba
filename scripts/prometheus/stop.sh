#!/usr/bin/env bash
# Stop the Prometheus and exporter that start.sh started (by their pid files only), then keep the logs.
set -uo pipefail
STATE=${PROM_STATE_DIR:-/tmp/gpuportal-prometheus}
bash "$(dirname "$0")/../lib/stop-by-pidfile.sh" "$STATE/prometheus.pid" "$STATE/exporter.pid"
echo "stopped"
