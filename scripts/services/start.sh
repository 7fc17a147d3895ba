#!/usr/bin/env bash
# Start PostgreSQL (127.0.0.1:5432), Redis (127.0.0.1:6379) and MariaDB (127.0.0.1:3306) for the suite's
# PostgreSQL run and the Slurm fixtures, installing them first where missing (scripts/ci/install-services.sh).
# Each is left running when it already answers. For a throwaway test machine only: the three accept passwordless
# connections from 127.0.0.1 (postgres and root), which is what README's PostgreSQL test command and
# scripts/slurm/start.sh use.
#
#   bash scripts/services/start.sh
#   DATABASE_URL=postgres://postgres@127.0.0.1:5432/test TEST_REDIS_URL=redis://127.0.0.1:6379/15 make test
set -euo pipefail
here=$(dirname "$0")
bash "$here/../ci/install-services.sh"

wait_for() {  # wait_for NAME COMMAND...: up to 30 s
    local name=$1; shift
    for _ in $(seq 60); do "$@" >/dev/null 2>&1 && { echo "$name is up"; return 0; }; sleep 0.5; done
    echo "$name did not start" >&2
    return 1
}

start_postgres() {
    pg_isready -q -h 127.0.0.1 -p 5432 && { echo "PostgreSQL already up"; return 0; }
    local version
    version=$(ls /etc/postgresql | sort -V | tail -1)
    if [ -z "$version" ]; then  # a package installed without its default cluster
        version=$(ls /usr/lib/postgresql | sort -V | tail -1)
        pg_createcluster "$version" main
    fi
    local hba=/etc/postgresql/$version/main/pg_hba.conf
    # Trust loopback TCP for the tests' superuser; ahead of Debian's scram lines, which would ask a password.
    grep -q '^# gpuportal-tests' "$hba" || sed -i '1i # gpuportal-tests: passwordless loopback for the test suite\nhost all all 127.0.0.1/32 trust\nhost all all ::1/128 trust' "$hba"
    pg_ctlcluster --skip-systemctl-redirect "$version" main start
    wait_for PostgreSQL pg_isready -q -h 127.0.0.1 -p 5432
}

start_redis() {
    redis-cli -h 127.0.0.1 ping >/dev/null 2>&1 && { echo "Redis already up"; return 0; }
    redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save "" --appendonly no \
        --logfile /tmp/gpuportal-redis-6379.log
    wait_for Redis redis-cli -h 127.0.0.1 ping
}

start_mariadb() {
    if ! mariadb-admin --protocol=socket -u root ping >/dev/null 2>&1; then
        install -d -o mysql -g mysql /run/mysqld
        [ -d /var/lib/mysql/mysql ] || mariadb-install-db --user=mysql --datadir=/var/lib/mysql >/dev/null
        start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd -- \
            --user=mysql --bind-address=127.0.0.1 --port=3306
        wait_for MariaDB mariadb-admin --protocol=socket -u root ping
    fi
    # slurmdbd and scripts/slurm connect over TCP as root without a password. Debian's root@localhost
    # signs in by the socket only, and 127.0.0.1 resolves to localhost, so root also gets an empty password.
    mariadb --protocol=socket -u root -e \
        "ALTER USER 'root'@'localhost' IDENTIFIED VIA unix_socket OR mysql_native_password USING PASSWORD('');"
    wait_for 'MariaDB over TCP' mariadb -h 127.0.0.1 -P 3306 -u root -e 'SELECT 1'
}

start_postgres
start_redis
start_mariadb
