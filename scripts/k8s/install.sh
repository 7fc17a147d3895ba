#!/usr/bin/env bash
# Make this machine ready for the live Kubernetes fixture (Debian 12, root), idempotently:
#   - runtime packages: etcd-server (our own etcd on loopback), openssl (the fixture's CA and certs);
#   - kube-apiserver, kube-scheduler and kube-controller-manager v1.20.2, built ONCE from Debian's
#     `kubernetes` source package (no registry here ships them as binaries) and cached in $K8S_CACHE/bin;
#     later runs skip the build. Only the components missing from the cache are built, so a cache made
#     before kube-controller-manager joined the list gains it without rebuilding the other two.
# Prints what it does. Build: ~10-15 min on 2 cores per component set; a cached run: a second or two.
set -euo pipefail

CACHE=${K8S_CACHE:-/var/cache/gpuportal-k8s}
BIN="$CACHE/bin"
# Bump when the recipe below changes, so a cache built by an older recipe is rebuilt.
BUILD_ID="kubernetes-1.20.2-debian-source+reflect2-1.0.2+json-iterator-1.1.12+go1.19"
# kube-controller-manager runs the ResourceQuota controller, so a quota's status.used is real.
COMPONENTS=(kube-apiserver kube-scheduler kube-controller-manager)
RUNTIME_PACKAGES=(etcd-server openssl)
BUILD_PACKAGES=(golang-go dpkg-dev rsync golang-github-modern-go-reflect2-dev golang-github-json-iterator-go-dev)
SOURCES=/etc/apt/sources.list.d/gpuportal-k8s-src.sources

log() { echo "install-k8s: $*"; }
die() { echo "install-k8s: $*" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || die "must run as root (apt-get, $CACHE)"
export DEBIAN_FRONTEND=noninteractive

missing_packages() {
    local pkg
    for pkg in "$@"; do
        dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || echo "$pkg"
    done
}

apt_updated=0
apt_install() {
    local missing
    mapfile -t missing < <(missing_packages "$@")
    if [ ${#missing[@]} -eq 0 ]; then
        log "packages already installed: $*"
        return
    fi
    if [ "$apt_updated" -eq 0 ]; then
        log "apt-get update"
        apt-get update -qq
        apt_updated=1
    fi
    log "apt-get install ${missing[*]}"
    # policy-rc.d: the etcd-server postinst must not start a system-wide etcd on :2379 (we run our own).
    local policy=/usr/sbin/policy-rc.d created=0
    if [ ! -e "$policy" ]; then
        printf '#!/bin/sh\nexit 101\n' >"$policy"
        chmod +x "$policy"
        created=1
    fi
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
    [ "$created" -eq 1 ] && rm -f "$policy"
    return 0
}

apt_install "${RUNTIME_PACKAGES[@]}"
command -v etcd >/dev/null || die "etcd missing after installing etcd-server"

# Two installs at once (two worktrees, two CI steps) wait for each other instead of building twice.
mkdir -p "$CACHE"
exec 9>"$CACHE/.lock"
flock 9
missing_components() {  # the components not in the cache, or built by another recipe
    local component
    if [ "$(cat "$BIN/BUILD_ID" 2>/dev/null)" != "$BUILD_ID" ]; then
        echo "${COMPONENTS[@]}"
        return
    fi
    for component in "${COMPONENTS[@]}"; do
        [ -x "$BIN/$component" ] || echo "$component"
    done
}
mapfile -t MISSING < <(missing_components | tr ' ' '\n' | sed '/^$/d')
if [ ${#MISSING[@]} -eq 0 ]; then
    log "cached build in $BIN ($BUILD_ID): $("$BIN/kube-apiserver" --version)"
    exit 0
fi

# ------------------------------------------------------------------------------------------- build
log "not in the cache $BIN: ${MISSING[*]}; building from Debian's source"
if [ ! -e "$SOURCES" ]; then
    # Only the source index of bookworm main: `apt-get source kubernetes` needs a deb-src entry.
    log "adding deb-src entry $SOURCES"
    cat >"$SOURCES" <<'SRC'
# added by gpuportal scripts/k8s/install.sh: Debian's kubernetes source package for the live fixture
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: bookworm
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
    apt_updated=0
fi
if ! apt-cache showsrc kubernetes >/dev/null 2>&1 || [ -z "$(apt-cache showsrc kubernetes 2>/dev/null)" ]; then
    apt_updated=0
fi
[ "$apt_updated" -eq 1 ] || { log "apt-get update (source index)"; apt-get update -qq; apt_updated=1; }
apt_install "${BUILD_PACKAGES[@]}"
log "$(go version)"

WORK="$CACHE/build"
rm -rf "$WORK"
mkdir -p "$WORK"
cd "$WORK"
log "apt-get source kubernetes (Debian's 1.20.2 with its vendor/ tree and security patches)"
# _apt cannot read root's build dir; downloading as root is fine for a source package.
apt-get source -qq kubernetes 2>&1 | grep -v "^W: Download is performed unsandboxed" || true
SRC_DIR=$(find "$WORK" -maxdepth 1 -type d -name 'kubernetes-*' | head -n1)
[ -n "$SRC_DIR" ] || die "apt-get source kubernetes gave no source tree"

# Go >= 1.18 changed runtime internals that reflect2 1.0.1 reads through unsafe: the apiserver then
# crashes on its first custom-resource request. Debian's reflect2 1.0.2 / json-iterator 1.1.12 fix it;
# they are API-compatible, so only the vendored sources are swapped (vendor/modules.txt is not checked
# against file contents).
swap_vendor() {
    local from=/usr/share/gocode/src/$1 to="$SRC_DIR/vendor/$1"
    [ -d "$from" ] || die "$from missing"
    log "vendor: $1 <- $(dpkg-query -S "$from" | cut -d: -f1) sources"
    find "$to" -maxdepth 1 -type f -name '*.go' -delete
    find "$from" -maxdepth 1 -type f -name '*.go' ! -name '*_test.go' -exec cp {} "$to/" \;
}
swap_vendor github.com/modern-go/reflect2
swap_vendor github.com/json-iterator/go

export GOCACHE="$WORK/gocache" GOPATH="$WORK/gopath" HOME="$WORK/home" CGO_ENABLED=0
mkdir -p "$HOME"
started=$(date +%s)
WHAT=$(printf 'cmd/%s ' "${MISSING[@]}")
log "make WHAT='${WHAT% }' (about 10-15 minutes on 2 cores)"
make -C "$SRC_DIR" WHAT="${WHAT% }" >"$WORK/build.log" 2>&1 \
    || { tail -n 40 "$WORK/build.log" >&2; die "build failed; log in $WORK/build.log"; }
log "built in $(( $(date +%s) - started )) s"

mkdir -p "$BIN"
# A recipe change rebuilt everything: drop the old binaries before the new BUILD_ID vouches for them.
[ "$(cat "$BIN/BUILD_ID" 2>/dev/null)" = "$BUILD_ID" ] || rm -f "$BIN"/kube-*
for component in "${MISSING[@]}"; do
    install -m 0755 "$SRC_DIR/_output/bin/$component" "$BIN/"
done
echo "$BUILD_ID" >"$BIN/BUILD_ID"
# The source tree and Go caches are ~2 GB and no longer needed: the binaries are the cache.
cd /
rm -rf "$WORK"
log "cached $BIN: $("$BIN/kube-apiserver" --version), $(du -sh "$BIN" | cut -f1)"
