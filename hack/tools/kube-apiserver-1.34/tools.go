//go:build tools

// Package kubeapiserver pins the kube-apiserver of the oldest Kubernetes minor
// this project supports, so that CI runs the cluster suite against it too.
// Only kube-apiserver differs: the other test binaries are the newest ones
// (hack/tools/cluster), as a cluster mid-upgrade may have them.
package kubeapiserver

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
)
