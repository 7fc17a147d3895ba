#!/usr/bin/env bash
# Install Debian's OpenLDAP server and tools (slapd, ldap-utils) for the live LDAP sign-in tests, and the
# headers python-ldap builds against (PyPI ships it as source only: libldap-dev, libsasl2-dev). Idempotent.
# Debian's own slapd service would listen on :389 with a system-wide database: policy-rc.d keeps the
# postinst from starting it; the tests start their own (scripts/ldap/start.sh).
set -euo pipefail
# CI runs this among its apt steps, then `make install-ldap` builds python-ldap against these headers.
# One run at a time (a developer may run it beside CI), so the second finds everything installed.
exec 9>/var/lock/gpuportal-ldap-install 2>/dev/null && flock 9 || true

PACKAGES=(slapd ldap-utils libldap-dev libsasl2-dev)
missing=()
for package in "${PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "ok installed" || missing+=("$package")
done
if [ "${#missing[@]}" -eq 0 ]; then
    echo "slapd already installed: $(dpkg-query -W -f='${Version}' slapd)"
    exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
    echo "scripts/ldap/install.sh must run as root to apt-get install ${PACKAGES[*]}" >&2
    exit 1
fi

# shellcheck source=../lib/apt-no-start.sh
. "$(dirname "$0")/../lib/apt-no-start.sh"
# slapd's debconf would otherwise ask for an admin password; start.sh builds its own throwaway config.
# Not fatal: another apt step's dpkg may hold debconf's lock, and Debian's default (unused) config does no harm.
echo "slapd slapd/no_configuration boolean true" | debconf-set-selections 2>/dev/null \
    || echo "debconf is busy: slapd gets Debian's default configuration (never started, start.sh uses its own)"
apt_install_without_starting "${PACKAGES[@]}"
echo "installed: slapd $(dpkg-query -W -f='${Version}' slapd)"
