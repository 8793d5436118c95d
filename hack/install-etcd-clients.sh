#!/usr/bin/env bash
# install-etcd-clients.sh builds etcdctl and etcdutl, pinned in
# hack/tools/etcdctl at the tests' etcd version, from their Go modules and
# caches them: e2e/etcdquorum backs up and restores with them as
# artifacts/deploy/README.md says to. Keyed like hack/install-helm.sh; a
# cold build takes under a minute on 2 cores, a cached one returns at once.
#
# Prints the directory holding etcdctl and etcdutl on its last line.
# Environment:
#   COMPOSITE_TEST_BIN_CACHE  cache root (default ${XDG_CACHE_HOME:-$HOME/.cache}/composite-apiserver/test-binaries)
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
mod="$root/hack/tools/etcdctl"

key=$( { cat "$mod/go.mod" "$mod/go.sum" "$mod/tools.go"; go env GOVERSION; } | sha256sum | cut -c1-16)
version=$(cd "$mod" && go list -m -f '{{.Version}}' go.etcd.io/etcd/etcdctl/v3)
cache_root=${COMPOSITE_TEST_BIN_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/composite-apiserver/test-binaries}
dir="$cache_root/etcd-clients-$version-$key"

if [[ -x "$dir/etcdctl" && -x "$dir/etcdutl" ]]; then
  echo "$dir"
  exit 0
fi

mkdir -p "$dir.partial"
start=$SECONDS
echo "building etcdctl and etcdutl $version ..." >&2
for b in etcdctl etcdutl; do
  (cd "$mod" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$dir.partial/$b" "go.etcd.io/etcd/$b/v3")
done
echo "built etcdctl and etcdutl in $((SECONDS - start))s" >&2

# Publish atomically so that an interrupted build is never taken for a cached one.
rm -rf "$dir"
mv "$dir.partial" "$dir"
echo "$dir"
