#!/usr/bin/env bash
# test.sh runs the whole test suite: unit tests, registry tests on a real
# etcd, the standalone end-to-end tests with the real binary and kubectl, and
# the end-to-end tests through a real kube-apiserver.
#
# It first builds (or takes from the cache) the pinned etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler and kubectl
# (hack/install-test-binaries.sh; and the
# oldest supported minor's kube-apiserver, for e2e/cluster once more), helm
# (hack/install-helm.sh), etcdctl and etcdutl
# (hack/install-etcd-clients.sh) and kwok (hack/install-kwok.sh), and puts
# that kubectl first on PATH so every test drives the cluster with the client
# of its version. Extra arguments go to `go test`. Last, short fuzz runs
# (FUZZTIME sets their length).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bin_dir=$(hack/install-test-binaries.sh | tail -n 1)
export COMPOSITE_TEST_BINARIES="$bin_dir"
export PATH="$bin_dir:$PATH"
# helm, built from its Go module (hack/tools/helm), lints and renders the
# chart in e2e/framework and e2e/cluster.
# (Assigned before exported: a failed build then stops the script.)
helm_dir=$(hack/install-helm.sh | tail -n 1)
export COMPOSITE_HELM="$helm_dir/helm"
# etcdctl and etcdutl back up and restore etcd in e2e/etcdquorum.
etcd_clients_dir=$(hack/install-etcd-clients.sh | tail -n 1)
export COMPOSITE_ETCD_CLIENTS="$etcd_clients_dir"
# kwok, built from its Go module (hack/tools/kwok) with its Stage files, is
# the kubelet of the pod stack's nodes (e2e/pods).
kwok_dir=$(hack/install-kwok.sh | tail -n 1)
export COMPOSITE_KWOK="$kwok_dir"
# The end-to-end tests skip without kubectl only when asked to be lenient.
export COMPOSITE_E2E_REQUIRE_KUBECTL=1

# The end-to-end packages wait on their clusters far more than they use the
# two cores (about 85% idle while a package's sequential tests restart
# servers and wait out leases), so four packages run at once (-p 4), each
# with its own stack, and the tests of a package that isolate themselves
# (t.Parallel) eight at a time (-parallel 8). e2e/pods (the pod stack:
# kube-scheduler and kwok nodes) runs about 2 minutes, most of it
# TestNodesStayReady waiting for the nodes' Leases to be renewed 75 s after
# the nodes were made.
release_out=$PWD/_output/ci-release
release_log=$PWD/_output/ci-release.log
mkdir -p _output
(cd hack/release && COMPOSITE_RELEASE_OUTPUT="$release_out" nice -n 10 \
  go test -count=1 -timeout 60m "$@" ./... >"$release_log" 2>&1) &
release_pid=$!
# A failure of the tests below ends the script: the release test with it.
trap 'kill "$release_pid" 2>/dev/null || true' EXIT

# go test -json goes through hack/testjson, which prints what go test prints
# without it (each package's ok line, a failing test's or package's whole
# output), keeps every event in _output/test.json (to compare the tests two
# runs ran) and ends with the ten slowest tests; it exits as go test does.
go run ./hack/testjson -o _output/test.json -- \
  go test -json -count=1 -timeout 30m -p 4 -parallel 8 "$@" ./...

# The cluster suite again against the oldest supported Kubernetes minor's
# kube-apiserver (the README's "Supported Kubernetes versions"; the other
# binaries stay the newest): the server turns off the admission plugins
# whose APIs that cluster lacks and serves writes, and every shipped
# manifest is accepted by it (kubectl apply --dry-run=server). Only
# kube-apiserver is built for it, cached by version like the others (cold:
# about 1,100 CPU-seconds). The whole package passes there too (534 s on a
# loaded 2-core machine); to keep the suite short, CI runs the tests that
# touch what differs between minors: discovery and aggregation, every
# client and media type, delegated authorization, admission (writes,
# escalation, impersonation), the shipped manifests and chart, /sync.
oldest_dir=$(hack/install-test-binaries.sh 1.34 | tail -n 1)
COMPOSITE_TEST_BINARIES="$oldest_dir" go test -count=1 -timeout 30m "$@" ./e2e/cluster/ -run \
  'TestServesWrites|TestAPIResources|TestDiscovery|TestKubectlManages|TestAuthorizationIsDelegated|TestIdentityHeaders|TestDeployManifests|TestChildApply|TestChartIsValid|TestEtcdOverlay|TestEveryClient|TestMediaTypes|TestLiveSyncDoesWhatALoopSyncDoes|TestLiveSyncOfADecoratedObject|TestNoEscalation|TestNamingAServiceAccount|TestDryRunSync|TestSyncNeedsCreate|TestPluginRBAC'

# A release, as hack/release.sh builds it from a tag (the image for
# linux/amd64 and linux/arm64, the chart, the plugin for five platforms,
# SBOMs, checksums) and pushes it, to a registry in memory: nothing leaves
# the machine; then each part is pulled back as a user pulls it
# (hack/release is a module of its own, outside ./...; it needs kubectl
# and helm, above). Then the container image that release built without
# Docker is inspected (hack/image, also its own module), from the release's
# layout: the server is cross-compiled once. A cold cross-build for arm64
# alone can take most of go test's default 10-minute timeout on two cores.
# It started in the background, niced, before the end-to-end tests (below
# ./... above): its cross-builds are CPU only, and the end-to-end tests
# leave much of the two cores idle while they wait on the cluster; one
# after the other they cost the suite about 15 more minutes cold.
echo "hack/test.sh: waiting for the release test (its output: $release_log)"
release_status=0
wait "$release_pid" || release_status=$?
cat "$release_log"
if [[ $release_status -ne 0 ]]; then
  echo "hack/test.sh: the release test (hack/release) failed" >&2
  exit "$release_status"
fi
(cd hack/image && COMPOSITE_IMAGE_LAYOUT="$release_out/image" COMPOSITE_IMAGE_VERSION=v0.0.0-test.1 \
  go test -count=1 -timeout 30m "$@" ./...)

# Short fuzz runs (FUZZTIME each: by default a count of inputs, not a
# duration, for Go's fuzzer fails a run with "context deadline exceeded"
# when its deadline comes while a worker is still on an input, as it may on
# a loaded machine; FUZZTIME=10m for long ones): any bytes as
# a hook's answer through the webhook client and the engine (a plan or an
# error, never a panic, never a delete on an error), as a CompositeController
# body (decoded, defaulted, validated: never a panic) and as a /sync
# request's inline parent and children (a result, a 400 or a 502: never a
# 500); any bytes as a watched object (the informers' one-pass decoder
# decodes them as client-go's decoder does, or leaves them to it), any bytes
# as a watch stream in any pieces (the informers' frame reader finds the
# frames client-go's JSON frame reader finds) and as a
# sync hook's answer (decoded in one pass as sigs.k8s.io/json decodes it,
# or left to it); and any JSON value as unstructured content
# (unstructuredjson writes json.Marshal's bytes for it, or json.Marshal's
# error).
fuzz() { go test "$1" -run '^$' -fuzz "$2" -fuzztime "${FUZZTIME:-500x}"; }
fuzz ./internal/reconcile/ FuzzHookAnswers
fuzz ./apis/metacontroller/install/ FuzzCompositeControllerBody
fuzz ./internal/syncrequest/ FuzzSyncRequest
fuzz ./internal/jsonobject/ FuzzDecode
fuzz ./internal/watchjson/ FuzzFrameReader
fuzz ./internal/hooks/ FuzzSyncAnswer
fuzz ./internal/unstructuredjson/ FuzzAppend
