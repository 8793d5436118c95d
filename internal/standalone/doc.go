// Package standalone is what lets composite-apiserver run with no cluster
// at all: an embedded etcd in a data directory, one bearer token that may do
// everything, and a kubeconfig that holds it. Nothing here is used when the
// server runs behind kube-apiserver.
package standalone
