#!/usr/bin/env bash
# Install Debian's Prometheus server (2.42 on bookworm) for the live utilisation tests. Idempotent.
# Debian's own prometheus service would listen on :9090 with system-wide storage: policy-rc.d keeps the
# postinst from starting it; the tests start their own instance (scripts/prometheus/start.sh).
set -euo pipefail

if command -v prometheus >/dev/null 2>&1 && command -v promtool >/dev/null 2>&1; then
    echo "prometheus already installed: $(prometheus --version 2>&1 | head -1)"
    exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
    echo "install-prometheus.sh must run as root to apt-get install prometheus" >&2
    exit 1
fi

export DEBIAN_FRONTEND=noninteractive
POLICY=/usr/sbin/policy-rc.d
created_policy=0
if [ ! -e "$POLICY" ]; then
    printf '#!/bin/sh\nexit 101\n' >"$POLICY"
    chmod +x "$POLICY"
    created_policy=1
fi
trap '[ "$created_policy" -eq 1 ] && rm -f "$POLICY"' EXIT
apt-get update -qq
# --no-install-recommends leaves out node-exporter and friends, which we never use.
apt-get install -y -qq --no-install-recommends prometheus
echo "installed: $(prometheus --version 2>&1 | head -1)"
