#!/usr/bin/env bash
# test.sh runs the whole test suite: unit tests, registry tests on a real
# etcd, the standalone end-to-end tests with the real binary and kubectl, and
# the end-to-end tests through a real kube-apiserver.
#
# It first builds (or takes from the cache) the pinned etcd, kube-apiserver,
# kube-controller-manager and kubectl (hack/install-test-binaries.sh), and puts
# that kubectl first on PATH so every test drives the cluster with the client
# of its version. Extra arguments go to `go test`. Last, a short fuzz run
# of the engine (FUZZTIME sets its length).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bin_dir=$(hack/install-test-binaries.sh | tail -n 1)
export COMPOSITE_TEST_BINARIES="$bin_dir"
export PATH="$bin_dir:$PATH"
# The end-to-end tests skip without kubectl only when asked to be lenient.
export COMPOSITE_E2E_REQUIRE_KUBECTL=1

go test -count=1 "$@" ./...

# A short fuzz run of the engine with the webhook client (any bytes as a
# hook's answer: a plan or an error, never a panic, never a delete on an
# error); FUZZTIME=10m for a long one.
go test ./pkg/reconcile/ -run '^$' -fuzz FuzzHookAnswers -fuzztime "${FUZZTIME:-10s}"
