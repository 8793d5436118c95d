package shard

import (
	"context"
	"fmt"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/component-base/metrics/testutil"
)

// leaderLease writes the group's leader-election Lease as client-go's
// leader election does: acquired or renewed by holder now, or released
// when holder is "".
func (c *cluster) leaderLease(t *testing.T, holder string) {
	t.Helper()
	ctx := context.Background()
	leases := c.client.CoordinationV1().Leases(namespace)
	l, err := leases.Get(ctx, "loop", metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		l, err = leases.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "loop", Namespace: namespace}}, metav1.CreateOptions{})
	}
	if err != nil {
		t.Fatal(err)
	}
	seconds := int32(leaseDuration.Seconds())
	if holder == "" {
		seconds = 1
	}
	now := metav1.NewMicroTime(c.clock.Now())
	l.Spec = coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &seconds, RenewTime: &now}
	if _, err := leases.Update(ctx, l, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func waitingGauge(t *testing.T) float64 {
	t.Helper()
	v, err := testutil.GetGaugeMetricValue(waitingForLeader)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestAMemberTakesNoShardWhileALeaderHoldsTheGroupsLease: during a rollout
// from --leader-elect to --shards, the old leader syncs every parent while
// it renews its Lease; the new members take no shard meanwhile (and say
// so), and take them all once it releases the Lease.
func TestAMemberTakesNoShardWhileALeaderHoldsTheGroupsLease(t *testing.T) {
	// Unregistered, a gauge of component-base records nothing.
	RegisterMetrics()
	c := newCluster()
	c.leaderLease(t, "leader")
	a, b := c.join(t, "a"), c.join(t, "b")
	for i := 0; i < 2*int(leaseDuration/retryPeriod); i++ {
		c.leaderLease(t, "leader")
		c.round(t, a, b)
		if n := len(a.Owned()) + len(b.Owned()); n != 0 {
			t.Fatalf("members own %d shards at %s while the leader renews its Lease", n, c.clock.Now().Format("15:04:05"))
		}
	}
	if got := waitingGauge(t); got != 1 {
		t.Errorf("composite_controller_shards_waiting_for_leader is %v while the leader holds its Lease, want 1", got)
	}
	c.leaderLease(t, "")
	c.settle(t, a, b)
	if got := waitingGauge(t); got != 0 {
		t.Errorf("composite_controller_shards_waiting_for_leader is %v once the leader released its Lease, want 0", got)
	}
}

// TestAMemberTakesTheShardsOnceADeadLeadersLeaseExpires: a leader that
// died without releasing its Lease holds the members back for the Lease's
// duration as they see it, as it would hold back another leader, and no
// longer.
func TestAMemberTakesTheShardsOnceADeadLeadersLeaseExpires(t *testing.T) {
	c := newCluster()
	c.leaderLease(t, "leader")
	a := c.join(t, "a")
	first := c.clock.Now()
	for len(a.Owned()) == 0 {
		if c.clock.Since(first) > leaseDuration+2*retryPeriod {
			t.Fatalf("a owns no shard %s after it first saw a Lease of %s that nobody renewed", c.clock.Since(first), leaseDuration)
		}
		c.round(t, a)
	}
	if took := c.clock.Since(first); took < leaseDuration {
		t.Errorf("a took shards %s after it first saw the leader's Lease, before its duration (%s)", took, leaseDuration)
	}
}

// TestAMemberGivesItsShardsUpWhenALeaderHoldsTheLease: a leader that took
// the Lease anyway (a server from before members and leaders knew of each
// other, started during a rollback) syncs every parent: the members stop
// syncing theirs at once.
func TestAMemberGivesItsShardsUpWhenALeaderHoldsTheLease(t *testing.T) {
	c := newCluster()
	a := c.join(t, "a")
	c.settle(t, a)
	c.leaderLease(t, "old-leader")
	c.round(t, a)
	if n := len(a.Owned()); n != 0 {
		t.Errorf("a still owns %d shards once a leader holds the Lease", n)
	}
}

// TestALeaderSeesTheGroupsLiveMembers: what a --leader-elect replica reads
// to step down: a member is live from the first sight of its Lease until
// it leaves, or until its Lease has not changed for its duration.
func TestALeaderSeesTheGroupsLiveMembers(t *testing.T) {
	c := newCluster()
	w := NewMembers(namespace, "loop", leaseDuration, c.client.CoordinationV1(), c.clock)
	live := func() string {
		t.Helper()
		got, err := w.Live(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return fmt.Sprint(got)
	}
	if got := live(); got != "[]" {
		t.Fatalf("members %s before any joined", got)
	}
	a, b := c.join(t, "a"), c.join(t, "b")
	c.settle(t, a, b)
	if got := live(); got != "[a b]" {
		t.Fatalf("members %s, want [a b]", got)
	}
	a.leave(context.Background())
	if got := live(); got != "[b]" {
		t.Fatalf("members %s once a left, want [b]", got)
	}
	b.cut.Store(true)
	died := c.clock.Now()
	for live() == "[b]" {
		if c.clock.Since(died) > leaseDuration {
			t.Fatalf("b is still live %s after its last renewal, past its Lease's duration", c.clock.Since(died))
		}
		c.clock.Step(retryPeriod)
	}
	if c.clock.Since(died) < leaseDuration-retryPeriod {
		t.Errorf("b was taken for dead %s after its last renewal, before its Lease's duration", c.clock.Since(died))
	}
}
