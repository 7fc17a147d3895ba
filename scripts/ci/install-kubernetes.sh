#!/usr/bin/env bash
# CI: the live Kubernetes fixture's etcd, openssl and a cached kube-apiserver, kube-scheduler and
# kube-controller-manager v1.20.2 build (tests/k8s_live). Idempotent: a machine that already has the build
# skips it in ~1 s; a fresh one builds once from Debian's source package (~15 min on 2 idle cores, up to
# ~45 on a busy machine; a cache holding the first two builds only the third). See scripts/k8s/install.sh.
set -euo pipefail
started=$(date +%s)
bash "$(dirname "$0")/../k8s/install.sh"
echo "install-kubernetes: done in $(( $(date +%s) - started )) s"
