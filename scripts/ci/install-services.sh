#!/usr/bin/env bash
# Install the three database servers the PostgreSQL run of the suite needs, from Debian's packages:
# PostgreSQL (the portal's database), Redis (broker, cache, the tests' own Redis) and MariaDB (slurmdbd's
# accounting). Machines of the `polyglot` kind start none of them, and a new one may have none installed.
# In short: apt-get install postgresql redis-server mariadb-server, without starting their services
# (policy-rc.d); scripts/services/start.sh starts each on 127.0.0.1 only. Idempotent: installs what is missing.
set -euo pipefail

# shellcheck source=../lib/apt-no-start.sh
. "$(dirname "$0")/../lib/apt-no-start.sh"
install_missing "database servers" postgresql postgresql-contrib redis-server mariadb-server mariadb-client
