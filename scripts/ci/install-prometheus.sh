#!/usr/bin/env bash
# CI: Debian's Prometheus for the live utilisation tests (tests/busy); idempotent, see scripts/prometheus/install.sh.
set -euo pipefail
exec bash "$(dirname "$0")/../prometheus/install.sh"
