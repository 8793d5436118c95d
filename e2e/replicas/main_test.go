// Package replicas holds end-to-end tests that run more than one
// composite-apiserver, or stop and kill the one of the stack: leader
// election, shards, the shipped Deployment's replicas, the switch between
// them, a kill while children are created. Each changes which servers run
// the loop, so they run one at a time, on a stack of their own that runs
// beside e2e/loop's (go test runs packages at once).
package replicas

import (
	"os"
	"testing"

	"github.com/composite-apiserver/composite-apiserver/e2e/framework"
)

var suite = framework.NewSuite(framework.Options{CompositeArgs: []string{"--workers=5", "-v=2"}})

func TestMain(m *testing.M) { os.Exit(suite.Main(m)) }
