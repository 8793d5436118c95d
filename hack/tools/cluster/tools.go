//go:build tools

// Package cluster records the commands this module builds, so that
// `go mod tidy` keeps every package they need in go.sum.
package cluster

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kubectl"
)
