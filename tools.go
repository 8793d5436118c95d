//go:build tools

// Package tools records the code generators' module so that go.mod pins
// the version hack/update-codegen.sh runs.
package tools

import _ "k8s.io/code-generator"
