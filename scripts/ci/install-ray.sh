#!/usr/bin/env bash
# CI: Ray's own venv for the live Ray collector tests (idempotent; the fixture starts the cluster).
set -euo pipefail
cd "$(dirname "$0")/../.."
bash scripts/ray/install.sh
