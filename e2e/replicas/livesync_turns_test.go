package replicas

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
	"github.com/composite-apiserver/composite-apiserver/e2e/framework"
)

// TestALiveSyncNeverRunsBesideTheLoopsSyncOfTheSameParent fires live
// /sync requests (without dryRun), two at a time, at a parent the loop
// keeps syncing (its spec changes every 100 ms), through a slow hook: no
// call about the parent begins while another is in flight. A live sync
// waits for the loop's sync of the parent to end, and the loop's next one
// waits for it.
func TestALiveSyncNeverRunsBesideTheLoopsSyncOfTheSameParent(t *testing.T) {
	// Sequential: under parallel load two of its 20 live syncs waited past 60 s for their turn (the loop took the parent ~120 times).
	hook := suite.HelloHook(t)
	ctx := context.Background()
	rec := recordSlowCallers(t, hook.URL, 300*time.Millisecond, []*framework.Process{suite.CompositeProcess()})
	ctrl := framework.HelloController{Name: "loop-livesync-turns", HookURL: rec.url}
	ctrl.Create(t, suite)
	ns := suite.Namespace(t, "loop-livesync-turns")
	suite.WaitObserved(t, ns, "p0", suite.CreateHello(t, ns, "p0", ctrl.Name, framework.HelloSpec("blue", "a")).GetGeneration())

	stopChurn := churn(ns, 1)
	defer stopChurn()
	const callers, syncsEach = 2, 10
	var wg sync.WaitGroup
	errs := make(chan error, callers*syncsEach)
	for c := 0; c < callers; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < syncsEach; i++ {
				if _, err := suite.LiveSync(ctx, ctrl.Name, ns, "p0"); err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	stopChurn()
	close(errs)
	for err := range errs {
		t.Errorf("live sync: %v", err)
	}
	calls := rec.parents(ns)[ns+"/p0"]
	total := 0
	for _, n := range calls {
		total += n
	}
	t.Logf("hook calls about the parent: %v, %d of them by live syncs", calls, callers*syncsEach)
	if total <= callers*syncsEach {
		t.Errorf("%d hook calls about the parent, no more than the %d live syncs: the loop did not sync it meanwhile", total, callers*syncsEach)
	}
	if n := rec.overlapping(); n != 0 {
		t.Errorf("%d hook calls about the parent began while another about it was in flight: a live sync ran beside another sync", n)
	}
}

// TestALiveSyncIsRefusedByAReplicaThatDoesNotLead: with --leader-elect, a
// live /sync that reaches a replica other than the leader would run beside
// the leader's loop; it is refused with 503, saying why and what to do,
// and nothing is synced. A preview runs on any replica.
func TestALiveSyncIsRefusedByAReplicaThatDoesNotLead(t *testing.T) {
	// Sequential: starts a replica and restarts the server (restartWith).
	hook := suite.HelloHook(t)
	ctx := context.Background()
	const lease = "e2e-livesync-leader"
	args := []string{"--leader-elect", "--leader-elect-lease-name=" + lease,
		"--leader-elect-lease-duration=8s", "--leader-elect-renew-deadline=6s", "--leader-elect-retry-period=1s"}
	leader := suite.MustStartReplica(t, ctx, "livesync-leader", args...)
	defer leader.Stop(30 * time.Second)
	suite.Eventually(t, "the replica started first leading", func() (bool, error) {
		holder, p, err := leaseHolder(ctx, framework.CompositeNamespace, lease, leader)
		if err == nil && p != leader {
			err = fmt.Errorf("held by %q", holder)
		}
		return p == leader, err
	})
	// The stack's own server, which kube-apiserver sends /sync to, does
	// not lead.
	suite.RestartWith(t, args...)
	rec := recordCallers(t, hook.URL, []*framework.Process{leader, suite.CompositeProcess()})
	ctrl := framework.HelloController{Name: "loop-livesync-follower", HookURL: rec.url}
	ctrl.Create(t, suite)
	ns := suite.Namespace(t, "loop-livesync-follower")
	suite.WaitObserved(t, ns, "p", suite.CreateHello(t, ns, "p", ctrl.Name, framework.HelloSpec("blue", "a")).GetGeneration())
	before := rec.byReplica(ns)

	_, err := suite.LiveSync(ctx, ctrl.Name, ns, "p")
	if !apierrors.IsServiceUnavailable(err) || !strings.Contains(err.Error(), "is not the leader") || !strings.Contains(err.Error(), "send it again") {
		t.Fatalf("live sync on a replica that does not lead: %v; want a 503 saying it is not the leader and what to do", err)
	}
	if after := rec.byReplica(ns); after[suite.CompositeProcess().Name] != before[suite.CompositeProcess().Name] {
		t.Errorf("the refused live sync called the hook: calls by replica %v, before %v", after, before)
	}
	preview, err := suite.Client.MetacontrollerV1alpha1().CompositeControllers().Sync(ctx, ctrl.Name,
		&v1alpha1.SyncRequest{Spec: v1alpha1.SyncRequestSpec{ParentRef: &v1alpha1.ParentReference{Namespace: ns, Name: "p"}}},
		metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	if err != nil {
		t.Fatalf("a preview on a replica that does not lead: %v", err)
	}
	if !preview.Status.DryRun {
		t.Errorf("the preview's answer is not a dry run")
	}
}
