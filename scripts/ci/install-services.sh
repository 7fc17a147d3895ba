#!/usr/bin/env bash
# Install the three database servers the PostgreSQL run of the suite needs, from Debian's packages:
# PostgreSQL (the portal's database), Redis (broker, cache, the tests' own Redis) and MariaDB (slurmdbd's
# accounting). Machines of the `polyglot` kind start none of them, and a new one may have none installed.
# In short: apt-get install postgresql redis-server mariadb-server, without starting their services
# (policy-rc.d); scripts/services/start.sh starts each on 127.0.0.1 only. Idempotent: installs what is missing.
set -euo pipefail

PACKAGES=(postgresql postgresql-contrib redis-server mariadb-server mariadb-client)

missing=()
for pkg in "${PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if [ ${#missing[@]} -eq 0 ]; then
    echo "database servers already installed"
    exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
    echo "install.sh must run as root to apt-get install: ${missing[*]}" >&2
    exit 1
fi
# shellcheck source=../lib/apt-no-start.sh
. "$(dirname "$0")/../lib/apt-no-start.sh"
apt_install_without_starting "${missing[@]}"
echo "installed: ${missing[*]}"
