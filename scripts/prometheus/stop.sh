#!/usr/bin/env bash
# Stop the Prometheus and exporter that start.sh started (by their pid files only), then keep the logs.
set -uo pipefail
STATE=${PROM_STATE_DIR:-/tmp/gpuportal-prometheus}
for name in prometheus exporter; do
    file="$STATE/$name.pid"
    [ -f "$file" ] || continue
    pid=$(cat "$file")
    if kill -0 "$pid" 2>/dev/null; then
        kill "$pid"
        for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -0 "$pid" 2>/dev/null && kill -9 "$pid"
    fi
    rm -f "$file"
done
echo "stopped"
