// Package install installs the chart for real, with helm, on a stack of
// its own: what it does to the cluster's objects (adopting an
// artifacts/deploy install, uninstalling) would break the aggregation that
// other packages' tests rely on.
package install

import (
	"os"
	"testing"

	"github.com/composite-apiserver/composite-apiserver/e2e/framework"
)

var suite = framework.NewSuite(framework.Options{CompositeArgs: []string{"--controller-loop=false"}})

func TestMain(m *testing.M) {
	os.Exit(suite.Main(m))
}
