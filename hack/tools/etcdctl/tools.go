//go:build tools

// Package tools makes `go mod tidy` keep etcdctl's and etcdutl's commands
// in this module.
package tools

import (
	_ "go.etcd.io/etcd/etcdctl/v3"
	_ "go.etcd.io/etcd/etcdutl/v3"
)
