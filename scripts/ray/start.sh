#!/usr/bin/env bash
# Start a real Ray cluster on this host, loopback only: a head and 2 workers, each claiming 8 GPUs
# (Ray only counts them; nothing touches a device), on their own addresses 127.0.3.1-3 ($RAY_IP_PREFIX).
#
# Ray comes from PyPI into its own venv ($RAY_VENV, default var/ray-venv, ~1.2 GB; made by install.sh
# on first run). The GCS listens on 6380 because Redis may hold 6379. Each node gets its own dashboard-agent
# port, as several raylets share the host. Prints KEY=VALUE lines (also written to $STATE/env):
#   RAY_DASHBOARD_URL, RAY_ADDRESS, RAY_VENV
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
STATE=${RAY_STATE_DIR:-/tmp/gpuportal-ray}
VENV=${RAY_VENV:-$REPO/var/ray-venv}
GCS_PORT=${RAY_GCS_PORT:-6380}
DASHBOARD_PORT=${RAY_DASHBOARD_PORT:-8265}
AGENT_PORT_BASE=${RAY_AGENT_PORT_BASE:-52365}
# Ray's default worker ports (10002-19999) would collide with the Slurm fleet's (16817-17108): give
# each node its own 300-port range above them.
WORKER_PORT_BASE=${RAY_WORKER_PORT_BASE:-21000}
WORKERS=2

die() { echo "start.sh: $*" >&2; exit 1; }

[ -x "$VENV/bin/ray" ] || RAY_VENV="$VENV" "$HERE/install.sh"

"$HERE/stop.sh" >/dev/null 2>&1 || true
rm -rf "$STATE"
mkdir -p "$STATE"

# Every Ray process inherits this marker, so stop.sh can end exactly this cluster's processes.
export GPUPORTAL_RAY_CLUSTER="$STATE"
export RAY_USAGE_STATS_ENABLED=0
IP_PREFIX=${RAY_IP_PREFIX:-127.0.3}
HEAD=$IP_PREFIX.1
common=(--num-gpus=8 --num-cpus=16 --memory=68719476736 --object-store-memory=134217728
        --disable-usage-stats)

"$VENV/bin/ray" start --head --node-ip-address="$HEAD" --port="$GCS_PORT" \
    --dashboard-host="$HEAD" --dashboard-port="$DASHBOARD_PORT" --include-dashboard=true \
    --dashboard-agent-listen-port="$AGENT_PORT_BASE" --temp-dir="$STATE/tmp" \
    --min-worker-port="$WORKER_PORT_BASE" --max-worker-port=$((WORKER_PORT_BASE + 299)) \
    --node-name=ray-head --labels='{"topology/leaf-switch":"leaf1","nvidia.com/gpu.product":"NVIDIA-H100-80GB-HBM3"}' \
    --resources='{"accelerator_type:H100":1}' "${common[@]}" >"$STATE/head.log" 2>&1 \
    || die "ray head failed: $(tail -5 "$STATE/head.log")"

for n in $(seq 1 "$WORKERS"); do
    leaf=leaf$(( n == 1 ? 1 : 2 ))
    "$VENV/bin/ray" start --address="$HEAD:$GCS_PORT" --node-ip-address="$IP_PREFIX.$((n + 1))" \
        --dashboard-agent-listen-port=$((AGENT_PORT_BASE + n)) --node-name="ray-worker-$n" \
        --min-worker-port=$((WORKER_PORT_BASE + 300 * n)) --max-worker-port=$((WORKER_PORT_BASE + 300 * n + 299)) \
        --labels="{\"topology/leaf-switch\":\"$leaf\",\"nvidia.com/gpu.product\":\"NVIDIA-H100-80GB-HBM3\"}" \
        --resources='{"accelerator_type:H100":1}' "${common[@]}" >"$STATE/worker-$n.log" 2>&1 \
        || die "ray worker $n failed: $(tail -5 "$STATE/worker-$n.log")"
done

URL="http://$HEAD:$DASHBOARD_PORT"
# Ready = the dashboard lists every node alive.
for _ in $(seq 1 150); do
    alive=$(curl -s "$URL/api/v0/nodes?limit=100" 2>/dev/null | grep -o '"state": *"ALIVE"' | wc -l || true)
    [ "$alive" -ge $((WORKERS + 1)) ] && break
    sleep 0.2
done
[ "$alive" -ge $((WORKERS + 1)) ] || die "only $alive nodes alive on $URL"
# ... and the autoscaler's load report (refreshed every few seconds) counts their GPUs.
for _ in $(seq 1 150); do
    reported=$(curl -s "$URL/api/cluster_status" 2>/dev/null \
        | "$VENV/bin/python" -c 'import json, sys
usage = json.load(sys.stdin)["data"]["clusterStatus"]["loadMetricsReport"]["usageByNode"]
print(sum(1 for node in usage.values() if "GPU" in node))' 2>/dev/null || echo 0)
    [ "$reported" -ge $((WORKERS + 1)) ] && break
    sleep 0.2
done
[ "$reported" -ge $((WORKERS + 1)) ] || die "the autoscaler report counts only $reported nodes"

{
    echo "RAY_DASHBOARD_URL=$URL"
    echo "RAY_ADDRESS=$HEAD:$GCS_PORT"
    echo "RAY_VENV=$VENV"
} | tee "$STATE/env"
