#!/usr/bin/env bash
# install-helm.sh builds the helm pinned in hack/tools/helm from its Go
# module and caches it; CI lints and renders the chart (artifacts/chart)
# with it. The cache directory is keyed by a hash of the pins and the Go
# version, so a change of pins builds anew and nothing else does. A cold
# build takes about a minute on 2 cores; a cached one returns at once.
#
# Prints the directory holding helm on its last line.
# Environment:
#   COMPOSITE_TEST_BIN_CACHE  cache root (default ${XDG_CACHE_HOME:-$HOME/.cache}/composite-apiserver/test-binaries)
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
mod="$root/hack/tools/helm"

version=$(cd "$mod" && go list -m -f '{{.Version}}' helm.sh/helm/v3)
# helm's own release build stamps the Kubernetes version of its client-go
# (v0.37.x: 1.37), which `helm template` and `helm lint` take for the
# cluster's: unstamped it says v1.20.0, which the chart's kubeVersion
# (>=1.34) refuses.
client_go=$(cd "$mod" && go list -m -f '{{.Version}}' k8s.io/client-go)
k8s_minor=$(echo "$client_go" | cut -d. -f2)
stamp=""
for pkg in helm.sh/helm/v3/pkg/chartutil helm.sh/helm/v3/pkg/lint/rules; do
  stamp+=" -X $pkg.k8sVersionMajor=1 -X $pkg.k8sVersionMinor=$k8s_minor"
done
key=$( { cat "$mod/go.mod" "$mod/go.sum" "$mod/tools.go"; go env GOVERSION; echo "$stamp"; } | sha256sum | cut -c1-16)
cache_root=${COMPOSITE_TEST_BIN_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/composite-apiserver/test-binaries}
dir="$cache_root/helm-$version-$key"

if [[ -x "$dir/helm" ]]; then
  echo "$dir"
  exit 0
fi

mkdir -p "$dir.partial"
start=$SECONDS
echo "building helm $version ..." >&2
# helm reports the version stamped here (`helm version`).
(cd "$mod" && CGO_ENABLED=0 go build -trimpath \
  -ldflags "-s -w -X helm.sh/helm/v3/internal/version.version=$version $stamp" \
  -o "$dir.partial/helm" helm.sh/helm/v3/cmd/helm)
echo "built helm in $((SECONDS - start))s" >&2

# Publish atomically so that an interrupted build is never taken for a cached one.
rm -rf "$dir"
mv "$dir.partial" "$dir"
echo "$dir"
