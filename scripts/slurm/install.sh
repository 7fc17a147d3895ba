#!/usr/bin/env bash
# Install the Slurm 22.05 packages the live collector tests run against (Debian 12), with slurmdbd and
# MariaDB for accounting (start.sh keeps one database per fleet on the MariaDB at 127.0.0.1:3306), and
# debootstrap for the Slurm 24.11 root that install-trixie.sh builds.
# Idempotent: does nothing when every package is already installed.
# Never installs slurm-wlm-emulator (it replaces the real slurmctld/slurmd behaviour).
set -euo pipefail

PACKAGES=(slurm-wlm slurmrestd munge slurm-wlm-jwt-plugin slurmdbd mariadb-server mariadb-client debootstrap)

# --no-install-recommends keeps the emulator and docs out; the helper's policy-rc.d stops the Debian
# postinst from starting system-wide slurmctld/slurmd/slurmdbd/munge services we never use (MariaDB is
# started by scripts/services/start.sh).
# shellcheck source=../lib/apt-no-start.sh
. "$(dirname "$0")/../lib/apt-no-start.sh"
install_missing "slurm packages" "${PACKAGES[@]}"
