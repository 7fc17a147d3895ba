#!/usr/bin/env bash
# Stop the Slurm 24.11 fleet started by start-trixie.sh (stop.sh with that script's default state dir).
export SLURM_STATE_DIR=${SLURM_STATE_DIR:-/tmp/gpuportal-slurm-trixie}
exec "$(cd "$(dirname "$0")" && pwd)/stop.sh"
