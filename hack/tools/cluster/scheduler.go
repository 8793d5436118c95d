//go:build tools

package cluster

// kube-scheduler binds the pod stack's Pods to its kwok nodes. It is listed
// apart from tools.go because hack/install-test-binaries.sh hashes tools.go
// into its cache key: the key names the pinned versions, and a command added
// later with the same pins is built into the cached directory when it is
// missing there, without rebuilding the others (kube-apiserver alone costs
// minutes of both cores).
import _ "k8s.io/kubernetes/cmd/kube-scheduler"
