#!/usr/bin/env bash
# Build the live Kubernetes fixture's binaries from Go modules and cache them by content hash:
#   kubernetes/  kube-apiserver, kube-controller-manager, kube-scheduler (k8s.io/kubernetes) and etcd
#                (go.etcd.io/etcd/server/v3 at the release k8s.io/kubernetes itself requires);
#   kwok/        KWOK's controller `kwok` (sigs.k8s.io/kwok), the fixture's kubelets.
# Each directory is a build module of the project's own (go.mod + go.sum, committed); each module is ONE
# `go build` of its programs, so shared packages compile once, and both share one build cache.
#
# The cache key (BUILD_ID in $OUT) is a hash of this script, every go.mod/go.sum here and `go version`: a
# bumped release, a changed recipe or another Go rebuilds; anything else is a cache hit in well under a
# second. Output: $K8S_GO_BIN (default /var/cache/gpuportal-k8s/go-bin). Needs Go >= the modules' `go`
# line and the Go module proxy (GOPROXY). No sources or binaries are committed to the project.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
CACHE=${K8S_CACHE:-/var/cache/gpuportal-k8s}
OUT=${K8S_GO_BIN:-$CACHE/go-bin}
GO=${GO:-$(command -v go || echo /usr/local/go/bin/go)}
MODULES=(kubernetes kwok)

log() { echo "build-k8s: $*"; }
die() { echo "build-k8s: $*" >&2; exit 1; }
[ -x "$GO" ] || die "no Go toolchain (looked for go on PATH and /usr/local/go/bin/go)"

export GOMODCACHE="$CACHE/go/mod" GOCACHE="$CACHE/go/build-cache" GOFLAGS=-mod=mod GOTOOLCHAIN=local \
    CGO_ENABLED=0
mkdir -p "$CACHE" "$GOMODCACHE" "$GOCACHE"

build_id() {
    {
        "$GO" version
        sha256sum "$HERE/build.sh"
        for module in "${MODULES[@]}"; do sha256sum "$HERE/$module/go.mod" "$HERE/$module/go.sum"; done
    } | sed "s|$HERE/||" | sha256sum | cut -c1-16
}
module_version() {  # module-dir module-path -> the version the build module requires
    (cd "$HERE/$1" && "$GO" list -m -f '{{.Version}}' "$2")
}

# Two builds at once (two worktrees, two CI steps) wait for each other instead of building twice.
exec 8>"$CACHE/.go-build.lock"
flock 8
ID=$(build_id)
if [ "$(cat "$OUT/BUILD_ID" 2>/dev/null)" = "$ID" ]; then
    log "cached in $OUT (BUILD_ID $ID)"
    exit 0
fi

STAGE="$CACHE/go-bin.new"
rm -rf "$STAGE"
mkdir -p "$STAGE"
started=$(date +%s)

K8S_VERSION=$(module_version kubernetes k8s.io/kubernetes)
KWOK_VERSION=$(module_version kwok sigs.k8s.io/kwok)
log "$("$GO" version); kubernetes $K8S_VERSION, etcd $(module_version kubernetes go.etcd.io/etcd/server/v3), kwok $KWOK_VERSION"

# The version the binaries report (`--version`, /version): k8s's own build stamps it the same way.
major_minor=${K8S_VERSION#v}
K8S_LDFLAGS="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    K8S_LDFLAGS+=" -X $pkg.gitVersion=$K8S_VERSION -X $pkg.gitMajor=${major_minor%%.*}"
    minor=${major_minor#*.}
    K8S_LDFLAGS+=" -X $pkg.gitMinor=${minor%%.*} -X $pkg.gitTreeState=archive"
done
(cd "$HERE/kubernetes" && "$GO" build -trimpath -ldflags "$K8S_LDFLAGS" -o "$STAGE/" \
    k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
    k8s.io/kubernetes/cmd/kube-scheduler go.etcd.io/etcd/server/v3)
# `go build` names go.etcd.io/etcd/server/v3's program after the element before the major version suffix.
mv "$STAGE/server" "$STAGE/etcd"
log "kubernetes built in $(( $(date +%s) - started )) s"

(cd "$HERE/kwok" && "$GO" build -trimpath -ldflags "-s -w" -o "$STAGE/" sigs.k8s.io/kwok/cmd/kwok)
log "kwok built; all in $(( $(date +%s) - started )) s"

echo "$ID" >"$STAGE/BUILD_ID"
rm -rf "$OUT"
mv "$STAGE" "$OUT"
log "cached in $OUT: $("$OUT/kube-apiserver" --version), etcd $("$OUT/etcd" --version | head -n1), $(du -sh "$OUT" | cut -f1)"
