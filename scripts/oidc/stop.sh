#!/usr/bin/env bash
# Stop the provider that start.sh started (by its pid file only); the state directory stays for its log.
set -uo pipefail
STATE=${OIDC_STATE_DIR:-/tmp/gpuportal-oidc}
bash "$(dirname "$0")/../lib/stop-by-pidfile.sh" "$STATE/provider.pid"
echo "stopped"
