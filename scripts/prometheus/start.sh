#!/usr/bin/env bash
# Start our own Prometheus on loopback scraping our DCGM-format exporter (exporter.py) every second.
# Never uses Debian's service or port 9090: own port ($PROM_PORT, 19090), own storage under $STATE.
#   EXPORTER_CONFIG   the exporter's JSON script (default: fixture.json beside this file)
#   PROM_STATE_DIR    pid files, config, TSDB and logs (default /tmp/gpuportal-prometheus)
#   PROM_PORT, EXPORTER_PORT, SCRAPE_INTERVAL (default 19090, 19400, 1s)
#   KEEP_DATA=1       keep the TSDB of a previous run (a restart after an outage keeps its history)
# Prints KEY=VALUE lines (also written to $STATE/env): PROMETHEUS_URL, EXPORTER_URL, EXPORTER_CONFIG.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
STATE=${PROM_STATE_DIR:-/tmp/gpuportal-prometheus}
PROM_PORT=${PROM_PORT:-19090}
EXPORTER_PORT=${EXPORTER_PORT:-19400}
INTERVAL=${SCRAPE_INTERVAL:-1s}
CONFIG=${EXPORTER_CONFIG:-$HERE/fixture.json}
PYTHON=${PYTHON:-python3}

die() { echo "start.sh: $*" >&2; exit 1; }
command -v prometheus >/dev/null || die "prometheus is not installed (scripts/prometheus/install.sh)"

"$HERE/stop.sh" >/dev/null 2>&1 || true
[ "${KEEP_DATA:-0}" = 1 ] || rm -rf "$STATE"
mkdir -p "$STATE/data"

"$PYTHON" "$HERE/exporter.py" --config "$CONFIG" --port "$EXPORTER_PORT" >"$STATE/exporter.log" 2>&1 &
echo $! >"$STATE/exporter.pid"

cat >"$STATE/prometheus.yml" <<YAML
global:
  scrape_interval: $INTERVAL
  evaluation_interval: $INTERVAL
scrape_configs:
  - job_name: dcgm
    honor_labels: true
    static_configs:
      - targets: ["127.0.0.1:$EXPORTER_PORT"]
YAML

prometheus --config.file="$STATE/prometheus.yml" --storage.tsdb.path="$STATE/data" \
    --storage.tsdb.retention.time=1d --web.listen-address="127.0.0.1:$PROM_PORT" \
    --log.level=warn >"$STATE/prometheus.log" 2>&1 &
echo $! >"$STATE/prometheus.pid"

URL="http://127.0.0.1:$PROM_PORT"
# Ready = the exporter target has been scraped successfully at least once.
up=""
for _ in $(seq 1 100); do
    up=$(curl -sf "$URL/api/v1/query?query=up%7Bjob%3D%22dcgm%22%7D" 2>/dev/null | grep -o '"value":\[[^]]*,"1"\]' || true)
    [ -n "$up" ] && break
    sleep 0.1
done
[ -n "$up" ] || die "exporter never scraped: $(tail -5 "$STATE/prometheus.log" "$STATE/exporter.log")"

{
    echo "PROMETHEUS_URL=$URL"
    echo "EXPORTER_URL=http://127.0.0.1:$EXPORTER_PORT/metrics"
    echo "EXPORTER_CONFIG=$CONFIG"
} | tee "$STATE/env"
