package loop

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/composite-apiserver/composite-apiserver/e2e/framework"
)

// TestALiveSyncNeverRunsBesideTheLoopsSyncOfTheSameParent fires live
// /sync requests (without dryRun), two at a time, at a parent the loop
// keeps syncing (its spec changes every 100 ms), through a slow hook: no
// call about the parent begins while another is in flight. A live sync
// waits for the loop's sync of the parent to end, and the loop's next one
// waits for it.
func TestALiveSyncNeverRunsBesideTheLoopsSyncOfTheSameParent(t *testing.T) {
	hook := setUp(t)
	ctx := context.Background()
	rec := recordSlowCallers(t, hook.URL, 300*time.Millisecond, []*framework.Process{stack.CompositeProcess()})
	ctrl := controller{Name: "loop-livesync-turns", HookURL: rec.url}
	ctrl.create(t)
	ns := namespace(t, "loop-livesync-turns")
	waitObserved(t, ns, "p0", createParent(t, ns, "p0", ctrl.Name, spec("blue", "a")).GetGeneration())

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
				if _, err := liveSync(ctx, ctrl.Name, ns, "p0"); err != nil {
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
