//go:build tools

// Package tools makes `go mod tidy` keep helm's command in this module.
package tools

import _ "helm.sh/helm/v3/cmd/helm"
