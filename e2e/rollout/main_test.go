// Package rollout holds the end-to-end tests of a controller's progressive
// rollout (spec.rollout) and of a parent's pause annotation: a
// CompositeController of hellos whose hooks are real HTTP servers in the
// test process, on the real stack, driven with the real kubectl and
// kubectl-composite a user runs.
package rollout

import (
	"os"
	"testing"

	"github.com/composite-apiserver/composite-apiserver/e2e/framework"
)

var suite = framework.NewSuite(framework.Options{CompositeArgs: []string{"--workers=5", "-v=2"}})

func TestMain(m *testing.M) {
	os.Exit(suite.Main(m))
}
