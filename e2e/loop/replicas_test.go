package loop

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/composite-apiserver/composite-apiserver/e2e/framework"
)

// TestLeaderElectionRunsTheLoopOnOneReplica starts two replicas with
// leader election: one leads and runs the loop, the other serves the API
// only; killing the leader hands the loop to the other.
func TestLeaderElectionRunsTheLoopOnOneReplica(t *testing.T) {
	setUp(t)
	ctx := context.Background()
	const lease = "e2e-leader-election"
	args := []string{"--leader-elect", "--leader-elect-lease-name=" + lease,
		"--leader-elect-lease-duration=4s", "--leader-elect-renew-deadline=3s", "--leader-elect-retry-period=500ms"}
	a, err := stack.StartReplica(ctx, "replica-a", args...)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Stop(30 * time.Second)
	b, err := stack.StartReplica(ctx, "replica-b", args...)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Stop(30 * time.Second)

	var holder string
	eventually(t, "a leader", func() (bool, error) {
		l, err := stack.Kube.CoordinationV1().Leases(framework.CompositeNamespace).Get(ctx, lease, metav1.GetOptions{})
		if err != nil || l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == "" {
			return false, nil
		}
		holder = *l.Spec.HolderIdentity
		return true, nil
	})
	leading := func(p *framework.Process) bool {
		return strings.Contains(p.Tail(1<<20), "Leading: starting the controller loop")
	}
	eventually(t, "one replica leading", func() (bool, error) { return leading(a) != leading(b), nil })
	leader, follower := a, b
	if leading(b) {
		leader, follower = b, a
	}
	t.Logf("%s leads (%s)", leader.Name, holder)

	leader.Kill()
	eventually(t, "the other replica taking over", func() (bool, error) {
		l, err := stack.Kube.CoordinationV1().Leases(framework.CompositeNamespace).Get(ctx, lease, metav1.GetOptions{})
		if err != nil || l.Spec.HolderIdentity == nil {
			return false, nil
		}
		return *l.Spec.HolderIdentity != holder && leading(follower), nil
	})
}
