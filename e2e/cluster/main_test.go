// Package cluster holds end-to-end tests through a real kube-apiserver with
// composite-apiserver registered as an aggregated API. One stack is shared
// by the package's tests; each test uses names of its own.
package cluster

import (
	"os"
	"testing"

	"github.com/composite-apiserver/composite-apiserver/e2e/framework"
)

var suite = framework.NewSuite(framework.Options{CompositeArgs: []string{"--controller-loop=false"}})

func TestMain(m *testing.M) {
	// The controller loop is off: these tests prove the API and the
	// dry-run preview, and a running loop would create the children a
	// dry-run must not. e2e/loop runs with it.
	os.Exit(suite.Main(m))
}
