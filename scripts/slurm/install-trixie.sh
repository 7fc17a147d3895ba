#!/usr/bin/env bash
# Build (once) a Debian trixie root with Slurm 24.11 from Debian's own packages, for the live tests of
# slurmrestd v0.0.40-v0.0.42. The root lives under $SLURM_TRIXIE_CACHE/<recipe hash>/root and is never
# mixed into this bookworm system: scripts/slurm/start-trixie.sh runs its daemons with chroot.
#
# Cached by content hash: the hash of the recipe (suite, package list and the build_root function),
# so a changed recipe builds a new root and an unchanged one is reused in about a second; comments and
# logging around it can change without a rebuild. Cold build: about 2-3 minutes (mostly downloads).
# Safe to run in parallel with the other install steps (it never calls this system's apt) and with
# itself (flock; a half-built root is never published: it is built beside and renamed into place).
set -euo pipefail

CACHE=${SLURM_TRIXIE_CACHE:-/var/cache/gpuportal-slurm-trixie}
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
SUITE=trixie
# slurmdbd talks to this host's MariaDB over TCP, so no database server goes into the root.
# slurm-wlm-jwt-plugin: auth/jwt (AuthAltTypes) for slurmrestd's clients; rest_auth/jwt is in slurmrestd.
PACKAGES=(slurmctld slurmd slurmrestd slurmdbd slurm-client munge slurm-wlm-mysql-plugin slurm-wlm-jwt-plugin)

log() { echo "install-trixie: $*"; }
die() { echo "install-trixie: $*" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || die "must run as root (debootstrap, chroot)"
command -v debootstrap >/dev/null || {
    # debootstrap is the one bookworm package this recipe needs on the host.
    log "apt-get install debootstrap"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >/dev/null \
        || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >/dev/null; }
}

build_root() {  # build_root WORK: debootstrap + the Slurm packages into WORK/root, checked, then WORK/COMPLETE
    local WORK=$1 started version
    started=$(date +%s)
    log "debootstrap --variant=minbase $SUITE from $MIRROR into $WORK/root"
    debootstrap --variant=minbase --keyring=/usr/share/keyrings/debian-archive-keyring.gpg \
        "$SUITE" "$WORK/root" "$MIRROR" >"$WORK/debootstrap.log" 2>&1 \
        || { tail -n 30 "$WORK/debootstrap.log" >&2; die "debootstrap failed"; }
    log "minbase done in $(( $(date +%s) - started )) s"

    # Package scripts must not start daemons inside the build (we start our own per state dir).
    printf '#!/bin/sh\nexit 101\n' >"$WORK/root/usr/sbin/policy-rc.d"
    chmod +x "$WORK/root/usr/sbin/policy-rc.d"
    cp /etc/resolv.conf "$WORK/root/etc/resolv.conf" 2>/dev/null || true
    # minbase writes no /etc/hosts: without it "localhost" (SlurmctldHost, AccountingStorageHost) does
    # not resolve and every client retries name lookups for minutes.
    printf '127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n' >"$WORK/root/etc/hosts"
    # A private mount namespace: /proc and /dev for apt and maintainer scripts vanish with the process.
    unshare --mount --propagation private -- bash -euo pipefail -c '
        root=$1; shift
        mount -t proc proc "$root/proc"
        mount --rbind /dev "$root/dev"
        chroot "$root" env DEBIAN_FRONTEND=noninteractive apt-get update -qq
        chroot "$root" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@"
        chroot "$root" apt-get clean
    ' _ "$WORK/root" "${PACKAGES[@]}" >"$WORK/apt.log" 2>&1 || { tail -n 30 "$WORK/apt.log" >&2; die "apt-get in the root failed"; }

    version=$(chroot "$WORK/root" dpkg-query -W -f='${Version}' slurmctld)
    case "$version" in 24.11.*) ;; *) die "expected Slurm 24.11 from $SUITE, got $version" ;; esac
    rm -rf "$WORK/root/var/lib/apt/lists"/* "$WORK/root/var/cache/apt"/*.bin
    echo "slurm $version, built $(date -u +%FT%TZ) in $(( $(date +%s) - started )) s, $(du -sh "$WORK/root" | cut -f1)" \
        >"$WORK/COMPLETE"
}

HASH=$( { echo "$SUITE ${PACKAGES[*]}"; declare -f build_root; } | sha256sum | cut -c1-16)
ROOT="$CACHE/$HASH/root"
mkdir -p "$CACHE"
exec 9>"$CACHE/.lock"
flock 9
if [ -f "$CACHE/$HASH/COMPLETE" ]; then
    log "cached root $ROOT: $(cat "$CACHE/$HASH/COMPLETE")"
    ln -sfn "$HASH" "$CACHE/current"
    exit 0
fi

WORK="$CACHE/$HASH.building"
rm -rf "$WORK"
mkdir -p "$WORK"
build_root "$WORK"
rm -rf "${CACHE:?}/$HASH"
mv "$WORK" "$CACHE/$HASH"
ln -sfn "$HASH" "$CACHE/current"
# Roots built by older recipes are no longer used by any script.
find "$CACHE" -mindepth 1 -maxdepth 1 -type d ! -name "$HASH" -exec rm -rf {} +
log "built $ROOT: $(cat "$CACHE/$HASH/COMPLETE")"
