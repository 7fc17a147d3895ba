#!/usr/bin/env bash
# Create the Ray venv the live tests run (var/ray-venv, ray[default] from PyPI, ~1.2 GB).
# Idempotent: does nothing when the pinned Ray is already there.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
VENV=${RAY_VENV:-$REPO/var/ray-venv}
RAY_VERSION=${RAY_VERSION:-2.60.0}
PYTHON=${PYTHON:-python3}

if [ -x "$VENV/bin/python" ] && "$VENV/bin/python" -c "import ray, sys; sys.exit(ray.__version__ != '$RAY_VERSION')" 2>/dev/null; then
    echo "ray $RAY_VERSION already in $VENV"
    exit 0
fi
"$PYTHON" -m venv "$VENV"
"$VENV/bin/pip" install -q "ray[default]==$RAY_VERSION"
echo "installed ray $RAY_VERSION into $VENV"
