#!/usr/bin/env bash
# release.sh builds, from a tag, everything a release publishes, into
# _output/release (OUTPUT):
#
#   image/                                  the server's image for linux/amd64 and linux/arm64,
#                                           an OCI image layout (hack/build-image.sh)
#   composite-apiserver-VERSION.tgz         the chart, version and appVersion from the tag, its
#                                           image REGISTRY/composite-apiserver:TAG by default
#   kubectl-composite_OS_ARCH.tar.gz|.zip   the plugin for linux and darwin (amd64, arm64) and
#                                           windows/amd64, with LICENSE and README.md
#   composite.yaml                          the plugin's krew manifest, its URIs under RELEASE_URL,
#                                           checked by krew's own validate-krew-manifest
#   *.sbom.cdx.json                         a CycloneDX SBOM of every binary shipped (the server
#                                           in each image, the plugin in each archive)
#   checksums.txt                           sha256 of every file above (`sha256sum -c checksums.txt`)
#
# and, with --push only, pushes the image to REGISTRY/composite-apiserver:TAG
# (crane) and the chart to oci://REGISTRY/charts/composite-apiserver
# (helm push). Without --push nothing leaves the machine: that is what CI
# runs; hack/release's test then pushes to a registry of its own, in memory.
#
#   hack/release.sh v0.2.0                  # build and check only
#   hack/release.sh --push v0.2.0           # ... then push (log in first: `crane auth login`, `helm registry login`)
#
# The tools are pinned Go modules, run with `go tool` (cached after the
# first build): crane (hack/tools/crane), cyclonedx-gomod
# (hack/tools/cyclonedx-gomod), krew and validate-krew-manifest
# (hack/tools/krew); helm from hack/install-helm.sh, or COMPOSITE_HELM.
#
# Environment:
#   REGISTRY     where the image and the chart go (default ghcr.io/composite-apiserver)
#   RELEASE_URL  where the plugin archives are downloaded from, for the krew manifest
#                (default https://github.com/composite-apiserver/composite-apiserver/releases/download/TAG)
#   OUTPUT       output directory, replaced (default _output/release)
#   PLAIN_HTTP   true pushes over plain HTTP (a registry on localhost, as in the test)
#   COMPOSITE_HELM  the helm to use (default: hack/install-helm.sh's)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

usage() { echo "usage: hack/release.sh [--push] TAG   (TAG: vMAJOR.MINOR.PATCH[-PRERELEASE])" >&2; exit 2; }
push=false
tag=""
for arg in "$@"; do
  case "$arg" in
    --push) push=true ;;
    -h|--help) usage ;;
    -*) echo "unknown flag $arg" >&2; usage ;;
    *) [[ -z "$tag" ]] || usage; tag=$arg ;;
  esac
done
[[ -n "$tag" ]] || usage
# A chart's version must be SemVer 2 and krew's spec.version a v-prefixed
# one: a tag that is neither would fail half-way, after the builds.
semver='^v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z.-]+)?$'
if [[ ! "$tag" =~ $semver ]]; then
  echo "tag $tag is not vMAJOR.MINOR.PATCH[-PRERELEASE]" >&2
  exit 2
fi
version=${tag#v}
registry=${REGISTRY:-ghcr.io/composite-apiserver}
registry=${registry%/}
release_url=${RELEASE_URL:-https://github.com/composite-apiserver/composite-apiserver/releases/download/$tag}
out=${OUTPUT:-$root/_output/release}
mkdir -p "$out"
out=$(cd "$out" && pwd)
plain_http=${PLAIN_HTTP:-false}
helm=${COMPOSITE_HELM:-}
if [[ -z "$helm" ]]; then
  helm="$("$root/hack/install-helm.sh" | tail -n 1)/helm"
fi
tool() { local mod=$1; shift; go -C "$root/hack/tools/$mod" tool "$@"; }

# The commit's time: archives and image layers carry it, so that one
# commit builds the same bytes.
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git -C "$root" log -1 --format=%ct 2>/dev/null || echo 0)}
rm -rf "$out"
mkdir -p "$out"
bin="$out/bin"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

echo "== image $registry/composite-apiserver:$tag (linux/amd64, linux/arm64)" >&2
VERSION=$tag OUTPUT="$out/image" TARBALLS=false BINARIES="$bin/server" \
  nice "$root/hack/build-image.sh" >&2

echo "== plugin archives and krew manifest" >&2
nice go -C "$root/hack/release" run . --source "$root" --version "$tag" --output "$out" \
  --binaries "$bin/plugin" --url "$release_url" --source-date-epoch "$SOURCE_DATE_EPOCH" >&2
# -skip-install: the archives are not at their URLs until the release is
# published; hack/release's test installs each platform from a local server.
tool krew validate-krew-manifest -manifest "$out/composite.yaml" -skip-install

echo "== SBOMs" >&2
# From each binary's own build information: exactly the modules linked
# into what ships (plus the Go standard library, which scanners also
# match); nothing is looked up.
for b in "$bin"/server/*/composite-apiserver "$bin"/plugin/*/kubectl-composite*; do
  platform=$(basename "$(dirname "$b")")
  name=$(basename "$b" .exe)_${platform/-/_}.sbom.cdx.json
  tool cyclonedx-gomod cyclonedx-gomod bin -json -std -version "$tag" -output "$out/$name" "$b"
done

echo "== chart $version" >&2
# The packaged chart's image is the one this release pushes, by default:
# `helm install oci://...` needs no --set image.
cp -R "$root/artifacts/chart/composite-apiserver" "$work/chart"
sed -i -E "/^image:/,/^[^ #]/ s|^(  repository:).*|\1 $registry/composite-apiserver|" "$work/chart/values.yaml"
grep -q "^  repository: $registry/composite-apiserver\$" "$work/chart/values.yaml" || {
  echo "can't set image.repository in the chart's values.yaml" >&2
  exit 1
}
"$helm" lint "$work/chart" >&2
"$helm" package "$work/chart" --version "$version" --app-version "$tag" --destination "$out" >&2

rm -rf "$bin"
(cd "$out" && sha256sum -- *.tgz *.tar.gz *.zip *.sbom.cdx.json composite.yaml >checksums.txt)
echo "wrote $out" >&2

if ! $push; then
  exit 0
fi
echo "== push" >&2
crane_flags=()
helm_flags=()
if [[ "$plain_http" == true ]]; then
  crane_flags+=(--insecure)
  helm_flags+=(--plain-http)
fi
tool crane crane push "${crane_flags[@]}" "$out/image" "$registry/composite-apiserver:$tag"
"$helm" push "$out/composite-apiserver-$version.tgz" "oci://$registry/charts" "${helm_flags[@]}"
