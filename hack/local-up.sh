#!/usr/bin/env bash
# local-up.sh starts, for a person, the stack the end-to-end tests use:
# etcd, kube-apiserver and kube-controller-manager (pinned, built once by
# hack/install-test-binaries.sh), and composite-apiserver from this checkout
# registered with an APIService, all on 127.0.0.1. It prints the
# `export KUBECONFIG=...` to use and stays up until Ctrl-C. With --pods it
# runs pods too (kube-scheduler and kwok's simulated nodes), as e2e/pods does.
#
# Usage: hack/local-up.sh [--dir DIR] [--dev-rights] [--pods] [-- extra composite-apiserver flags]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
exec go run ./hack/local-up "$@"
