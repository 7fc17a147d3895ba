#!/usr/bin/env bash
# Start a private slapd on loopback with a throwaway config and a seeded directory (seed.ldif beside this
# file: users alice, bob, carol with password "secret-<name>", groups gpu-vision-leads, gpu-vision-users, nlp).
# Never Debian's service or port 389: own port ($LDAP_PORT, 26389) and own database under $LDAP_STATE_DIR.
# Prints KEY=VALUE lines (also written to $STATE/env): LDAP_URI, LDAP_BASE, LDAP_BIND_DN, LDAP_BIND_PASSWORD.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
STATE=${LDAP_STATE_DIR:-/tmp/gpuportal-ldap}
PORT=${LDAP_PORT:-26389}
BASE="dc=gpuportal,dc=test"
ADMIN_DN="cn=admin,$BASE"
ADMIN_PASSWORD="admin-secret"  # a throwaway directory on loopback, deleted by the next start

die() { echo "start.sh: $*" >&2; exit 1; }
command -v slapd >/dev/null || PATH=$PATH:/usr/sbin
command -v slapd >/dev/null || die "slapd is not installed (scripts/ldap/install.sh)"

LDAP_STATE_DIR=$STATE "$HERE/stop.sh" >/dev/null 2>&1 || true
rm -rf "$STATE"
mkdir -p "$STATE/data"

cat >"$STATE/slapd.conf" <<CONF
include /etc/ldap/schema/core.schema
include /etc/ldap/schema/cosine.schema
include /etc/ldap/schema/inetorgperson.schema
include /etc/ldap/schema/nis.schema
modulepath /usr/lib/ldap
moduleload back_mdb
pidfile $STATE/slapd.pid
database mdb
maxsize 104857600
suffix "$BASE"
rootdn "$ADMIN_DN"
rootpw $(slappasswd -s "$ADMIN_PASSWORD")
directory $STATE/data
access to attrs=userPassword by self write by anonymous auth by * none
access to * by * read
CONF

slapadd -f "$STATE/slapd.conf" -l "$HERE/seed.ldif" >"$STATE/slapadd.log" 2>&1 || die "slapadd: $(cat "$STATE/slapadd.log")"
slapd -f "$STATE/slapd.conf" -h "ldap://127.0.0.1:$PORT/" -d 0 >"$STATE/slapd.log" 2>&1 &
echo $! >"$STATE/slapd.pid"

URI="ldap://127.0.0.1:$PORT"
for _ in $(seq 1 100); do
    ldapwhoami -x -H "$URI" -D "$ADMIN_DN" -w "$ADMIN_PASSWORD" >/dev/null 2>&1 && break
    sleep 0.1
done
ldapwhoami -x -H "$URI" -D "$ADMIN_DN" -w "$ADMIN_PASSWORD" >/dev/null 2>&1 || die "slapd did not answer: $(tail -5 "$STATE/slapd.log")"

{
    echo "LDAP_URI=$URI"
    echo "LDAP_BASE=$BASE"
    echo "LDAP_BIND_DN=$ADMIN_DN"
    echo "LDAP_BIND_PASSWORD=$ADMIN_PASSWORD"
} | tee "$STATE/env"
