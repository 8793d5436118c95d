// Package loop holds end-to-end tests of the embedded controller loop:
// CompositeControllers with real HTTP hooks (in Python) running against a
// real kube-apiserver, kube-controller-manager (for garbage collection) and
// composite-apiserver registered as an aggregated API. One stack is shared
// by the package's tests; each test uses namespaces and names of its own.
package loop

import (
	"os"
	"testing"

	"github.com/composite-apiserver/composite-apiserver/e2e/framework"
)

var stack *framework.Stack

func TestMain(m *testing.M) {
	os.Exit(framework.TestMain(m, framework.Options{CompositeArgs: []string{"--workers=5", "-v=2"}}, &stack))
}

func dumpLogsOnFailure(t *testing.T) { stack.DumpLogsOnFailure(t) }
