#!/usr/bin/env bash
# CI: the live Kubernetes fixture's openssl/curl and its cached Go builds (tests/k8s_live,
# tests/admission_live): kube-apiserver, kube-controller-manager, kube-scheduler, etcd and KWOK at the
# releases pinned in scripts/k8s/build. Idempotent: a machine that has the build for this BUILD_ID skips it
# in well under a second; a fresh one builds once (see docs/kubernetes-fixture.md, Measurements). .ci/run
# runs this beside the apt steps and the other installs. See scripts/k8s/install.sh.
set -euo pipefail
started=$(date +%s)
bash "$(dirname "$0")/../k8s/install.sh"
echo "install-kubernetes: done in $(( $(date +%s) - started )) s"
