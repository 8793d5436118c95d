// Package pods proves the pod stack (framework.WithPods) that Metacontroller's
// pod examples run on, through kubectl as a user drives it: workloads are
// scheduled onto kwok nodes and their pods become Ready, claims bind, Jobs
// and pods whose containers would exit complete, deleted pods go, nodes stay
// Ready, and pods carry what admission adds to them. No container runs:
// kwok's Stages stand in for kubelets.
package pods

import (
	"os"
	"testing"

	"github.com/composite-apiserver/composite-apiserver/e2e/framework"
)

var suite = framework.NewSuite(framework.WithPods(framework.Options{}))

func TestMain(m *testing.M) {
	os.Exit(suite.Main(m))
}
