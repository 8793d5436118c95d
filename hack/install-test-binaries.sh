#!/usr/bin/env bash
# install-test-binaries.sh builds the pinned etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler and kubectl that the end-to-end
# tests and hack/local-up.sh run, from the Go modules pinned in
# hack/tools/cluster, and caches them (kube-scheduler only runs in the pod
# stack: framework.WithPods, hack/local-up.sh --pods). kubectl is built too
# so that the tests drive the cluster with the client of the same version,
# whatever a machine has installed.
#
# The cache directory is keyed by a hash of the pins (go.mod, go.sum, the etcd
# main and the Go version), so a change of pins builds anew and nothing else
# does. A cold build takes minutes (kube-apiserver alone ~4 min on 2 cores);
# a cached one returns at once. A binary missing from a cached directory (a
# command added to the pins later, as kube-scheduler was) is built into it
# alone.
#
# Prints the directory holding the binaries on its last line.
#
# With a minor as argument (`hack/install-test-binaries.sh 1.34`), it builds
# that minor's kube-apiserver instead, from its own pinned module
# (hack/tools/kube-apiserver-MINOR), and prints a directory holding it beside
# the newest etcd, kube-controller-manager and kubectl (links into the
# default directory, built first if need be): the cluster suite runs against
# the oldest supported minor that way. Each version is cached apart.
# Environment:
#   COMPOSITE_TEST_BIN_CACHE  cache root (default ${XDG_CACHE_HOME:-$HOME/.cache}/composite-apiserver/test-binaries)
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cache_root=${COMPOSITE_TEST_BIN_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/composite-apiserver/test-binaries}

if [[ $# -gt 0 ]]; then
  minor=$1
  mod="$root/hack/tools/kube-apiserver-$minor"
  [[ -f "$mod/go.mod" ]] || { echo "no pinned module for kube-apiserver $minor ($mod)" >&2; exit 1; }
  newest=$("$0" | tail -n 1)
  k8s_version=$(awk '$1 == "require" && $2 == "k8s.io/kubernetes" { print $3 }' "$mod/go.mod")
  key=$( { cat "$mod/go.mod" "$mod/go.sum" "$mod/tools.go"; go env GOVERSION; echo "$newest"; } | sha256sum | cut -c1-16)
  dir="$cache_root/$k8s_version-$key"
  if [[ ! -x "$dir/kube-apiserver" ]]; then
    rm -rf "$dir.partial"
    mkdir -p "$dir.partial"
    stamp=""
    for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
      stamp+=" -X $pkg.gitVersion=$k8s_version -X $pkg.gitMajor=1 -X $pkg.gitMinor=${minor#*.} -X $pkg.gitTreeState=clean"
    done
    start=$SECONDS
    echo "building kube-apiserver $k8s_version ..." >&2
    (cd "$mod" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w $stamp" -o "$dir.partial/kube-apiserver" k8s.io/kubernetes/cmd/kube-apiserver)
    echo "built kube-apiserver $k8s_version in $((SECONDS - start))s" >&2
    for b in etcd kube-controller-manager kubectl; do ln -s "$newest/$b" "$dir.partial/$b"; done
    rm -rf "$dir"
    mv "$dir.partial" "$dir"
  fi
  # Linked apart: a directory cached before kube-scheduler was pinned lacks it.
  [[ -e "$dir/kube-scheduler" ]] || ln -sfn "$newest/kube-scheduler" "$dir/kube-scheduler"
  echo "$dir"
  exit 0
fi

mod="$root/hack/tools/cluster"
k8s_version=v1.37.2

key=$( { cat "$mod/go.mod" "$mod/go.sum" "$mod/etcd/main.go" "$mod/tools.go"; go env GOVERSION; } | sha256sum | cut -c1-16)
dir="$cache_root/$k8s_version-$key"

binaries=(etcd kube-apiserver kube-controller-manager kube-scheduler kubectl)
missing=()
for b in "${binaries[@]}"; do [[ -x "$dir/$b" ]] || missing+=("$b"); done
if [[ ${#missing[@]} -eq 0 ]]; then
  echo "$dir"
  exit 0
fi

stamp=""
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  stamp+=" -X $pkg.gitVersion=$k8s_version -X $pkg.gitMajor=1 -X $pkg.gitMinor=37 -X $pkg.gitTreeState=clean"
done

cd "$mod"
# Each binary is written beside its final name and renamed into place, so
# that an interrupted build is never taken for a cached one; the ones
# already cached are kept.
mkdir -p "$dir"
for b in "${missing[@]}"; do
  pkg=k8s.io/kubernetes/cmd/$b
  [[ $b == etcd ]] && pkg=./etcd
  start=$SECONDS
  echo "building $b ..." >&2
  CGO_ENABLED=0 go build -trimpath -ldflags "-s -w $stamp" -o "$dir/$b.partial" "$pkg"
  mv "$dir/$b.partial" "$dir/$b"
  echo "built $b in $((SECONDS - start))s" >&2
done
echo "$dir"
