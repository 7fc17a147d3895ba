#!/usr/bin/env bash
# Stop the slapd that start.sh started (by its pid file only); the state directory stays for its log.
set -uo pipefail
STATE=${LDAP_STATE_DIR:-/tmp/gpuportal-ldap}
bash "$(dirname "$0")/../lib/stop-by-pidfile.sh" "$STATE/slapd.pid"
echo "stopped"
