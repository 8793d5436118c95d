// Package loop holds end-to-end tests of the embedded controller loop:
// CompositeControllers with real HTTP hooks (in Python) running against a
// real kube-apiserver, kube-controller-manager (for garbage collection) and
// composite-apiserver registered as an aggregated API. One stack is shared
// by the package's tests; each test uses namespaces and names of its own.
// Tests that run more than one composite-apiserver (replicas, leader
// election, shards) are in e2e/replicas, whose stack runs beside this one.
package loop

import (
	"os"
	"testing"

	"github.com/composite-apiserver/composite-apiserver/e2e/framework"
)

var suite = framework.NewSuite(framework.Options{CompositeArgs: []string{"--workers=5", "-v=2"}})

func TestMain(m *testing.M) { os.Exit(suite.Main(m)) }
