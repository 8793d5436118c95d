#!/usr/bin/env bash
# install-kwok.sh builds the kwok pinned in hack/tools/kwok from its Go module
# and caches it beside the Stage files of the same module version
# (sigs.k8s.io/kwok's kustomize/stage: nodes initialize and renew their
# lease, pods become Ready, Job pods complete, deleted pods go). The pod
# stack (framework.WithPods, hack/local-up.sh --pods) runs it as the nodes
# and kubelets of the cluster. The cache directory is keyed by a hash of the
# pins and the Go version, so a change of pins builds anew and nothing else
# does. A cold build takes about a minute on 2 cores; a cached one returns
# at once.
#
# Prints the directory holding kwok (and stages/) on its last line.
# Environment:
#   COMPOSITE_TEST_BIN_CACHE  cache root (default ${XDG_CACHE_HOME:-$HOME/.cache}/composite-apiserver/test-binaries)
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
mod="$root/hack/tools/kwok"

version=$(cd "$mod" && go list -m -f '{{.Version}}' sigs.k8s.io/kwok)
key=$( { cat "$mod/go.mod" "$mod/go.sum" "$mod/tools.go"; go env GOVERSION; } | sha256sum | cut -c1-16)
cache_root=${COMPOSITE_TEST_BIN_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/composite-apiserver/test-binaries}
dir="$cache_root/kwok-$version-$key"

if [[ -x "$dir/kwok" ]]; then
  echo "$dir"
  exit 0
fi

rm -rf "$dir.partial"
mkdir -p "$dir.partial/stages"
start=$SECONDS
echo "building kwok $version ..." >&2
(cd "$mod" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$dir.partial/kwok" sigs.k8s.io/kwok/cmd/kwok)
echo "built kwok in $((SECONDS - start))s" >&2

# The Stages kwok's own "fast" profile runs (kwokctl's default), taken from
# the module so that they match the binary: without Stages kwok v0.8 does
# nothing to nodes or pods. node-heartbeat-with-lease keeps the nodes'
# conditions fresh while kwok renews their Leases (--node-lease-duration-seconds).
src=$(cd "$mod" && go list -m -f '{{.Dir}}' sigs.k8s.io/kwok)/kustomize/stage
for f in node/fast/node-initialize.yaml node/heartbeat-with-lease/node-heartbeat-with-lease.yaml \
  pod/fast/pod-ready.yaml pod/fast/pod-complete.yaml pod/fast/pod-delete.yaml; do
  cp "$src/$f" "$dir.partial/stages/"
done
chmod -R u+w "$dir.partial"

# Publish atomically so that an interrupted build is never taken for a cached one.
rm -rf "$dir"
mv "$dir.partial" "$dir"
echo "$dir"
