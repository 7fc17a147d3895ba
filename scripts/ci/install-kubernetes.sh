#!/usr/bin/env bash
# CI: the live Kubernetes fixture's openssl/curl and its cached Go builds (tests/k8s_live,
# tests/admission_live, tests/kueue_live): kube-apiserver, kube-controller-manager, kube-scheduler, etcd, KWOK
# and Kueue at the releases pinned in scripts/k8s/build. Idempotent: a machine that has each module's build
# for its BUILD_ID.<module> skips it
# in well under a second; a fresh one builds once (see docs/kubernetes-fixture.md, Measurements). .ci/run
# runs this beside the apt steps and the other installs. See scripts/k8s/install.sh.
set -euo pipefail
started=$(date +%s)
bash "$(dirname "$0")/../k8s/install.sh"
echo "install-kubernetes: done in $(( $(date +%s) - started )) s"
