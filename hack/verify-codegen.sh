#!/usr/bin/env bash
# verify-codegen.sh fails when a generated file is stale: it regenerates into
# a copy of the tree and diffs the copy against the original, leaving the
# working tree untouched.
set -o errexit -o nounset -o pipefail

SCRIPT_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
tmp=$(mktemp -d -t verify-codegen.XXXXXX)
trap 'rm -rf "${tmp}"' EXIT

# Everything but VCS metadata and build output, so the copy builds as the
# original does.
tar -C "${SCRIPT_ROOT}" --exclude=./.git --exclude=./_output -cf - . | tar -C "${tmp}" -xf -
"${tmp}/hack/update-codegen.sh"

ret=0
for dir in apis pkg/generated hack/api-rules-violations.list; do
  diff -Naupr "${SCRIPT_ROOT}/${dir}" "${tmp}/${dir}" || ret=1
done
if [[ ${ret} -ne 0 ]]; then
  echo "Generated code is out of date: run hack/update-codegen.sh" >&2
  exit 1
fi
echo "Generated code is up to date."
