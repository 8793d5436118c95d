// Package chaos kills the control plane while the controller loop works:
// etcd, kube-apiserver and composite-apiserver at random moments while
// parents converge, and the leader of two composite-apiserver replicas in
// the middle of applying children. Afterwards every parent must be
// converged, every child must exist exactly once with exactly one
// controller reference, and no child may have been deleted or recreated.
//
// The default suite runs short versions; COMPOSITE_E2E_LONG=1 runs 300
// parents and ten leader kills. COMPOSITE_E2E_CHAOS_SEED replays the
// random moments of a run (each run logs its seed).
package chaos

import (
	"os"
	"testing"

	"github.com/composite-apiserver/composite-apiserver/e2e/framework"
)

var suite = framework.NewSuite(framework.Options{CompositeArgs: append([]string{"-v=2"}, leaderElection...)})

// leaseName is the Lease of the loop's leader election: the stack's own
// composite-apiserver runs as one replica of a Deployment would, and the
// leader test starts a second one.
const leaseName = "e2e-chaos"

// leaderElection are the flags of every replica: a short lease, so that a
// killed leader is replaced within seconds.
var leaderElection = []string{"--leader-elect", "--leader-elect-lease-name=" + leaseName,
	"--leader-elect-lease-duration=4s", "--leader-elect-renew-deadline=3s", "--leader-elect-retry-period=500ms"}

func TestMain(m *testing.M) {
	os.Exit(suite.Main(m))
}
