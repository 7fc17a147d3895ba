# Sourced by the install scripts: apt_install_without_starting PACKAGE... installs Debian packages
# (--no-install-recommends) while a policy-rc.d keeps their postinst from starting system-wide services
# (slurmctld, slapd, prometheus, ...): the tests start their own on their own ports. The policy file is
# removed again only when this call made it.
apt_install_without_starting() {
    local policy=/usr/sbin/policy-rc.d created=0 status=0
    export DEBIAN_FRONTEND=noninteractive
    if [ ! -e "$policy" ]; then
        printf '#!/bin/sh\nexit 101\n' >"$policy"
        chmod +x "$policy"
        created=1
    fi
    apt-get update -qq && apt-get install -y -qq --no-install-recommends "$@" || status=$?
    [ "$created" -eq 1 ] && rm -f "$policy"
    return "$status"
}

# install_missing WHAT PACKAGE...: apt_install_without_starting the PACKAGEs not installed yet (root is needed
# only then); WHAT names them in the messages.
install_missing() {
    local what=$1 pkg missing=()
    shift
    for pkg in "$@"; do
        dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
    done
    if [ ${#missing[@]} -eq 0 ]; then
        echo "$what already installed"
        return 0
    fi
    if [ "$(id -u)" -ne 0 ]; then
        echo "must run as root to apt-get install: ${missing[*]}" >&2
        return 1
    fi
    apt_install_without_starting "${missing[@]}"
    echo "installed: ${missing[*]}"
}
