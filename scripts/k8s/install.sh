#!/usr/bin/env bash
# Make this machine ready for the live Kubernetes fixture (Debian 12, root), idempotently:
#   - runtime packages: openssl (the fixture's CA, certs and tokens) and curl (start.sh's health checks);
#   - kube-apiserver, kube-controller-manager, kube-scheduler, etcd, KWOK's `kwok` and Kueue's `kueue`, built
#     from Go modules at the releases pinned in scripts/k8s/build/*/go.mod (scripts/k8s/build/build.sh) and
#     cached per module by a content hash of its go.mod/go.sum, its recipe and `go version` in
#     /var/cache/gpuportal-k8s/go-bin.
# Needs Go (the `polyglot` machines have /usr/local/go) and the Go module proxy. A cold build takes ~19 min
# of CPU (see docs/kubernetes-fixture.md); a cached run well under a second.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
RUNTIME_PACKAGES=(openssl curl)

log() { echo "install-k8s: $*"; }
die() { echo "install-k8s: $*" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || die "must run as root (apt-get, /var/cache/gpuportal-k8s)"
export DEBIAN_FRONTEND=noninteractive

missing=()
for pkg in "${RUNTIME_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if [ ${#missing[@]} -gt 0 ]; then
    log "apt-get install ${missing[*]}"
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

export PATH="$PATH:/usr/local/go/bin"
command -v go >/dev/null || die "no Go toolchain on PATH or in /usr/local/go/bin (this machine kind has Go 1.26)"
bash "$HERE/build/build.sh"
