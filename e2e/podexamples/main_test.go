// Package podexamples runs Metacontroller's pod examples (catset, bluegreen,
// daemonjob, indexedjob, service-per-pod and service-per-pod-v2, copied
// from Metacontroller v4.17.2 into testdata/metacontroller) against
// composite-apiserver on the pod stack (framework.WithPods: kube-scheduler,
// kube-controller-manager's workload controllers, kwok's nodes). Each test
// applies the example's own kustomization, with only its hooks' URLs
// pointed at the example's own hook server run as a local process, and
// takes the steps of the example's test.sh with kubectl, as a user would.
package podexamples

import (
	"os"
	"testing"

	"github.com/composite-apiserver/composite-apiserver/e2e/framework"
)

var suite = framework.NewSuite(framework.WithPods(framework.Options{}))

func TestMain(m *testing.M) {
	os.Exit(suite.Main(m))
}
