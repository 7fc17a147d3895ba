#!/usr/bin/env bash
# Start the same fake-GPU fleet as start.sh, but Slurm 24.11 from the Debian trixie root that
# install-trixie.sh built (slurmctld, slurmd, slurmdbd, slurmrestd and munged all run chrooted into it,
# on loopback ports of their own). slurmrestd then speaks openapi/slurmctld + openapi/slurmdbd with the
# data parsers v0.0.40, v0.0.41 and v0.0.42. Prints the same KEY=VALUE lines as start.sh.
#
# Defaults differ from start.sh's so both fleets can run at once; each is overridable the same way:
# SLURM_STATE_DIR (/tmp/gpuportal-slurm-trixie), SLURMCTLD_PORT (16827), SLURMDBD_PORT (16829),
# SLURMRESTD_PORT (16830), SLURMD_PORT_BASE (17200), SLURM_TRIXIE_CACHE (/var/cache/gpuportal-slurm-trixie).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
CACHE=${SLURM_TRIXIE_CACHE:-/var/cache/gpuportal-slurm-trixie}
[ -f "$CACHE/current/COMPLETE" ] || { echo "start-trixie.sh: no trixie root in $CACHE: run scripts/slurm/install-trixie.sh" >&2; exit 1; }
# The resolved path, so a newer root published while this fleet runs does not change under it.
export SLURM_ROOT
SLURM_ROOT=$(readlink -f "$CACHE/current")/root
export SLURM_STATE_DIR=${SLURM_STATE_DIR:-/tmp/gpuportal-slurm-trixie}
export SLURMCTLD_PORT=${SLURMCTLD_PORT:-16827}
export SLURMDBD_PORT=${SLURMDBD_PORT:-16829}
export SLURMRESTD_PORT=${SLURMRESTD_PORT:-16830}
export SLURMD_PORT_BASE=${SLURMD_PORT_BASE:-17200}
export SLURMRESTD_PLUGINS=""
export SLURMRESTD_PING_VERSION=v0.0.42
exec "$HERE/start.sh"
