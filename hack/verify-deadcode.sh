#!/usr/bin/env bash
# verify-deadcode.sh fails when a function is reachable from none of the
# project's programs and tests (golang.org/x/tools' deadcode, at the version
# go.mod pins), so that a rename or a refactor can't leave the old function
# or a forwarder behind.
#
# Left out on purpose:
#   - pkg/hookapi, the Go SDK for hook authors: their programs call it, ours
#     need not;
#   - Example functions: documentation that go test runs, which deadcode
#     does not count as a root.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

version=$(go list -m -f '{{.Version}}' golang.org/x/tools)
out=$(go run "golang.org/x/tools/cmd/deadcode@$version" -test ./...)
dead=$(grep -v -e '^pkg/hookapi/' -e 'unreachable func: Example' <<<"$out" || true)
if [[ -n "$dead" ]]; then
  echo "Functions no program or test reaches (delete them, or use them):"
  echo "$dead"
  exit 1
fi
echo "No dead code."
