#!/usr/bin/env bash
# build-image.sh builds composite-apiserver's container image without
# Docker: hack/image cross-compiles the server (CGO_ENABLED=0) for each
# platform and writes a multi-platform OCI image layout, the same image the
# Dockerfile builds (entrypoint /composite-apiserver, user 65532:65532).
#
#   hack/build-image.sh                      # _output/image/oci + _output/image/oci-linux-<arch>.tar
#   VERSION=v0.1.0 PLATFORMS=linux/amd64 hack/build-image.sh
#
# Push it with any OCI tool, e.g. `crane push _output/image/oci REGISTRY/composite-apiserver:VERSION`
# or `skopeo copy --all oci:_output/image/oci:VERSION docker://REGISTRY/composite-apiserver:VERSION`;
# load one platform into a local runtime with `docker load -i _output/image/oci-linux-amd64.tar`
# or `kind load image-archive _output/image/oci-linux-amd64.tar`.
#
# Environment:
#   VERSION    stamped into the binary (--version) and the labels (default: git describe, else dev)
#   PLATFORMS  comma-separated os/arch list (default linux/amd64,linux/arm64)
#   OUTPUT     layout directory (default _output/image/oci)
#   TARBALLS   false leaves out the docker-loadable tarballs (default true)
#   BINARIES   keep the compiled servers there as <os>-<arch>/composite-apiserver
#              (hack/release.sh writes their SBOMs; default: removed)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

version=${VERSION:-$(git describe --tags --always --dirty 2>/dev/null || echo dev)}
revision=$(git rev-parse HEAD 2>/dev/null || true)
# The commit's time, so that one commit builds one digest.
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || echo 0)}

cd hack/image
go run . \
  --source "$root" \
  --platforms "${PLATFORMS:-linux/amd64,linux/arm64}" \
  --version "$version" \
  --revision "$revision" \
  --output "${OUTPUT:-$root/_output/image/oci}" \
  --tarballs="${TARBALLS:-true}" \
  --binaries "${BINARIES:-}"
