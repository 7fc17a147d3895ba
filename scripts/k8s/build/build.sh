#!/usr/bin/env bash
# Build the live Kubernetes fixture's binaries from Go modules and cache them by content hash:
#   kubernetes/  kube-apiserver, kube-controller-manager, kube-scheduler (k8s.io/kubernetes) and etcd
#                (go.etcd.io/etcd/server/v3 at the release k8s.io/kubernetes itself requires);
#   kwok/        KWOK's controller `kwok` (sigs.k8s.io/kwok), the fixture's kubelets;
#   kueue/       Kueue's controller-manager `kueue` (sigs.k8s.io/kueue) and its release's CRDs, webhook
#                registrations and ClusterRole (kueue-config/).
# Each directory is a build module of the project's own (go.mod + go.sum, committed); each module is ONE
# `go build` of its programs, so shared packages compile once, and all share one build cache.
#
# Each module has its own cache key ($OUT/BUILD_ID.<module>): a hash of `go version`, the module's
# go.mod/go.sum and its recipe (its build_<module> function below). A bumped release, a changed recipe or
# another Go rebuilds that module only; anything else is a cache hit in well under a second.
# K8S_BUILD_MODULES="kueue" builds a subset. Output: $K8S_GO_BIN (default /var/cache/gpuportal-k8s/go-bin). Needs Go >= the modules' `go`
# line and the Go module proxy (GOPROXY). No sources or binaries are committed to the project.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
CACHE=${K8S_CACHE:-/var/cache/gpuportal-k8s}
OUT=${K8S_GO_BIN:-$CACHE/go-bin}
GO=${GO:-$(command -v go || echo /usr/local/go/bin/go)}
declare -A MAIN=([kubernetes]=k8s.io/kubernetes [kwok]=sigs.k8s.io/kwok [kueue]=sigs.k8s.io/kueue)
read -r -a MODULES <<<"${K8S_BUILD_MODULES:-kubernetes kwok kueue}"  # a subset: K8S_BUILD_MODULES="kueue"

log() { echo "build-k8s: $*"; }
die() { echo "build-k8s: $*" >&2; exit 1; }
[ -x "$GO" ] || die "no Go toolchain (looked for go on PATH and /usr/local/go/bin/go)"

export GOMODCACHE="$CACHE/go/mod" GOCACHE="$CACHE/go/build-cache" GOFLAGS=-mod=mod GOTOOLCHAIN=local \
    CGO_ENABLED=0
mkdir -p "$CACHE" "$GOMODCACHE" "$GOCACHE"

# One function per build module: its recipe. Each writes its programs into $1.
build_kubernetes() {
    local version major_minor minor pkg ldflags="-s -w"
    version=$(module_version kubernetes k8s.io/kubernetes)
    # The version the binaries report (`--version`, /version): k8s's own build stamps it the same way.
    major_minor=${version#v}
    minor=${major_minor#*.}
    for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
        ldflags+=" -X $pkg.gitVersion=$version -X $pkg.gitMajor=${major_minor%%.*}"
        ldflags+=" -X $pkg.gitMinor=${minor%%.*} -X $pkg.gitTreeState=archive"
    done
    (cd "$HERE/kubernetes" && "$GO" build -trimpath -ldflags "$ldflags" -o "$1/" \
        k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
        k8s.io/kubernetes/cmd/kube-scheduler go.etcd.io/etcd/server/v3)
    # `go build` names go.etcd.io/etcd/server/v3's program after the element before the major version suffix.
    mv "$1/server" "$1/etcd"
}
build_kwok() {
    (cd "$HERE/kwok" && "$GO" build -trimpath -ldflags "-s -w" -o "$1/" sigs.k8s.io/kwok/cmd/kwok)
}
build_kueue() {
    # Kueue's controller-manager (cmd/kueue), stamped with its release as Kueue's Makefile does.
    local version
    version=$(module_version kueue sigs.k8s.io/kueue)
    (cd "$HERE/kueue" && "$GO" build -trimpath -o "$1/" \
        -ldflags "-s -w -X sigs.k8s.io/kueue/pkg/version.GitVersion=$version" sigs.k8s.io/kueue/cmd/kueue)
    # The release's own CRDs, webhook registrations and controller roles, which scripts/k8s/kueue.py
    # installs (the webhooks rewritten to URLs on loopback): what runs and what is installed never differ.
    local src
    src=$(cd "$HERE/kueue" && "$GO" list -m -f '{{.Dir}}' sigs.k8s.io/kueue)/config/components
    mkdir -p "$1/kueue-config/crd"
    cp "$src"/crd/bases/*.yaml "$1/kueue-config/crd/"
    cp "$src/webhook/manifests.yaml" "$1/kueue-config/webhooks.yaml"
    cp "$src/rbac/role.yaml" "$1/kueue-config/role.yaml"
    cp "$src/rbac/manager_secrets_role.yaml" "$1/kueue-config/secrets-role.yaml"
    chmod -R u+w "$1/kueue-config"  # the module cache is read-only
}

module_id() {  # the cache key of one module: Go, the module's go.mod/go.sum and its recipe
    {
        "$GO" version
        (cd "$HERE/$1" && sha256sum go.mod go.sum)
        declare -f "build_$1"
    } | sha256sum | cut -c1-16
}
module_version() {  # module-dir module-path -> the version the build module requires
    (cd "$HERE/$1" && "$GO" list -m -f '{{.Version}}' "$2")
}

# Two builds at once (two worktrees, two CI steps) wait for each other instead of building twice.
exec 8>"$CACHE/.go-build.lock"
flock 8
mkdir -p "$OUT"
# ($OUT/BUILD_ID is the single key of the older two-module recipe: left alone for trees that still use it.)
for module in "${MODULES[@]}"; do
    id=$(module_id "$module")
    if [ "$(cat "$OUT/BUILD_ID.$module" 2>/dev/null)" = "$id" ]; then
        log "$module cached in $OUT (BUILD_ID.$module $id)"
        continue
    fi
    stage="$CACHE/go-bin.new-$module"
    rm -rf "$stage"
    mkdir -p "$stage"
    started=$(date +%s)
    log "$("$GO" version): building $module (${MAIN[$module]} $(module_version "$module" "${MAIN[$module]}"))"
    rm -f "$OUT/BUILD_ID.$module"
    "build_$module" "$stage"
    for made in "$stage"/*; do rm -rf "$OUT/${made##*/}"; mv "$made" "$OUT/"; done
    rmdir "$stage"
    echo "$id" >"$OUT/BUILD_ID.$module"
    log "$module built in $(( $(date +%s) - started )) s"
done
log "cached in $OUT ($(du -sh "$OUT" | cut -f1)):$(cat "$OUT"/BUILD_ID.* | tr '\n' ' ')"
