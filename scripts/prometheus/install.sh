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

# shellcheck source=../lib/apt-no-start.sh
. "$(dirname "$0")/../lib/apt-no-start.sh"
# --no-install-recommends (in the helper) leaves out node-exporter and friends, which we never use.
apt_install_without_starting prometheus
echo "installed: $(prometheus --version 2>&1 | head -1)"
