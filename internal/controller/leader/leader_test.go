package leader

import (
	"context"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/composite-apiserver/composite-apiserver/internal/shard"
)

// TestALeaderStepsDownForShardMembersAndReleasesItsLeaseAfterItsLoop: a
// replica with --shards joining the group of the leader's Lease name (a
// rollout from --leader-elect to --shards) stops the leader's loop; the
// Lease is released only once the loop has returned, and the leader does
// not lead again while the member is live.
func TestALeaderStepsDownForShardMembersAndReleasesItsLeaseAfterItsLoop(t *testing.T) {
	kube := fake.NewClientset()
	le := Election{Namespace: "composite-system", Name: "loop", LeaseDuration: 2 * time.Second, RenewDeadline: time.Second, RetryPeriod: 100 * time.Millisecond}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	leases := kube.CoordinationV1().Leases(le.Namespace)
	holder := func() string {
		l, err := leases.Get(context.Background(), le.Name, metav1.GetOptions{})
		if err != nil || l.Spec.HolderIdentity == nil {
			return ""
		}
		return *l.Spec.HolderIdentity
	}
	started, stopped := make(chan struct{}, 10), make(chan string, 10)
	go func() {
		_ = Run(ctx, kube, le, func(ctx context.Context) {
			started <- struct{}{}
			<-ctx.Done()
			// Still held while the loop stops.
			stopped <- holder()
		})
	}()
	select {
	case <-started:
	case <-time.After(30 * time.Second):
		t.Fatal("the loop did not start with no shard member around")
	}
	member := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{
		Name: le.Name + "-member-m", Namespace: le.Namespace,
		Labels: map[string]string{shard.GroupLabel: le.Name, shard.RoleLabel: "member"},
	}}
	m := "m"
	member.Spec.HolderIdentity = &m
	if _, err := leases.Create(context.Background(), member, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case h := <-stopped:
		if h == "" {
			t.Error("the Lease was released before the loop had stopped")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the loop still runs 30s after a shard member joined")
	}
	if err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return holder() == "", nil
	}); err != nil {
		t.Fatalf("the Lease is still held by %q after the loop stopped", holder())
	}
	// The member renews its Lease meanwhile: it stays live.
	for i := 0; i < 10; i++ {
		time.Sleep(le.RetryPeriod)
		now := metav1.NewMicroTime(time.Now())
		member.Spec.RenewTime = &now
		if _, err := leases.Update(context.Background(), member, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		select {
		case <-started:
			t.Fatal("the loop started again while a shard member is live")
		default:
		}
	}
}

// The grace of a sync in flight when the loop stops ends before another
// replica may take a Lease this one failed to renew: with the server's
// defaults (15 s, 10 s, 2 s), 1.5 s; none when the timings leave no room.
func TestTheStopGraceEndsBeforeALostLeaseCanBeTaken(t *testing.T) {
	for _, c := range []struct {
		le   Election
		want time.Duration
	}{
		{Election{LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 2 * time.Second}, 1500 * time.Millisecond},
		{Election{LeaseDuration: 10 * time.Second, RenewDeadline: 8 * time.Second, RetryPeriod: 2 * time.Second}, 0},
	} {
		got := c.le.StopGrace()
		if got != c.want {
			t.Errorf("%+v: grace %s, want %s", c.le, got, c.want)
		}
		if lost := c.le.RenewDeadline + c.le.RetryPeriod + got; lost > c.le.LeaseDuration {
			t.Errorf("%+v: a sync may run %s after the last renewal, past the Lease's %s", c.le, lost, c.le.LeaseDuration)
		}
	}
}
