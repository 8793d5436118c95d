#!/usr/bin/env bash
# local-up.sh starts, for a person, the stack the end-to-end tests use:
# etcd, kube-apiserver and kube-controller-manager (pinned, built once by
# hack/install-test-binaries.sh), and composite-apiserver from this checkout
# registered with an APIService, all on 127.0.0.1. It prints the
# `export KUBECONFIG=...` to use and stays up until Ctrl-C.
#
# Usage: hack/local-up.sh [--dir DIR] [-- extra composite-apiserver flags]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
exec go run ./hack/local-up "$@"
