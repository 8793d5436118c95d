//go:build tools

// Package tools makes `go mod tidy` keep kwok's command in this module.
package tools

import _ "sigs.k8s.io/kwok/cmd/kwok"
