#!/usr/bin/env bash
# update-codegen.sh regenerates every generated file of the project from the
# API types in apis/: deepcopy, defaults and conversions next to the types;
# OpenAPI definitions, clientset, listers, informers and apply configurations
# under pkg/generated. hack/verify-codegen.sh checks the result is current.
#
# The generators are k8s.io/code-generator at the version go.mod pins (and the
# k8s.io/kube-openapi openapi-gen that version pins), installed into a cache
# directory outside the tree.
set -o errexit -o nounset -o pipefail

SCRIPT_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
cd "${SCRIPT_ROOT}"
THIS_PKG=github.com/composite-apiserver/composite-apiserver
BOILERPLATE="${SCRIPT_ROOT}/hack/boilerplate.go.txt"

codegen_version=$(go list -m -f '{{.Version}}' k8s.io/code-generator)
CODEGEN_PKG=$(go mod download -json "k8s.io/code-generator@${codegen_version}" | sed -n 's/^\s*"Dir": "\(.*\)",$/\1/p')
# kube_codegen.sh installs the generators into GOBIN: keep them out of the
# user's GOPATH/bin and keyed by version.
export GOBIN="${CODEGEN_BIN:-${XDG_CACHE_HOME:-$HOME/.cache}/composite-apiserver/codegen-${codegen_version}}"
mkdir -p "${GOBIN}"

source "${CODEGEN_PKG}/kube_codegen.sh"

kube::codegen::gen_helpers \
    --boilerplate "${BOILERPLATE}" \
    "${SCRIPT_ROOT}/apis"

kube::codegen::gen_openapi \
    --output-dir "${SCRIPT_ROOT}/pkg/generated/openapi" \
    --output-pkg "${THIS_PKG}/pkg/generated/openapi" \
    --report-filename "${SCRIPT_ROOT}/hack/api-rules-violations.list" \
    --update-report \
    --output-model-name-file zz_generated.model_name.go \
    --boilerplate "${BOILERPLATE}" \
    "${SCRIPT_ROOT}/apis"

kube::codegen::gen_client \
    --with-watch \
    --with-applyconfig \
    --applyconfig-openapi-schema <(go run "${THIS_PKG}/hack/models-schema") \
    --output-dir "${SCRIPT_ROOT}/pkg/generated" \
    --output-pkg "${THIS_PKG}/pkg/generated" \
    --boilerplate "${BOILERPLATE}" \
    "${SCRIPT_ROOT}/apis"
