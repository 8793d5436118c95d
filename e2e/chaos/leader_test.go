package chaos

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/composite-apiserver/composite-apiserver/e2e/framework"
)

// replica is one composite-apiserver of the two that elect a leader: the
// stack's own, behind the APIService, or one started beside it.
type replica struct {
	name    string
	mu      sync.Mutex
	proc    *framework.Process // the replica beside; nil for the stack's
	starts  int
	isStack bool
}

func (r *replica) process() *framework.Process {
	if r.isStack {
		return suite.CompositeProcess()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.proc
}

func (r *replica) kill() {
	if r.isStack {
		suite.KillComposite()
		return
	}
	r.process().Kill()
}

func (r *replica) start(ctx context.Context) error {
	if r.isStack {
		return suite.StartComposite(ctx)
	}
	r.mu.Lock()
	r.starts++
	name := fmt.Sprintf("%s-%d", r.name, r.starts)
	r.mu.Unlock()
	p, err := suite.StartReplica(ctx, name, leaderElection...)
	if err != nil {
		return err
	}
	r.mu.Lock()
	r.proc = p
	r.mu.Unlock()
	return nil
}

func (r *replica) stop() {
	if p := r.process(); p != nil && !r.isStack {
		_ = p.Stop(30 * time.Second)
	}
}

// TestLeaderKilledMidApply runs two replicas of composite-apiserver with
// leader election, and three times (ten with COMPOSITE_E2E_LONG=1) creates
// a batch of parents and kills the leader (SIGKILL) once it has applied
// some of their children but not all, then starts it again: the other
// replica takes the loop over. Afterwards every parent is converged, each child exists
// exactly once with exactly one controller reference, and no child was
// deleted or recreated.
func TestLeaderKilledMidApply(t *testing.T) {
	setUp(t)
	ctx := context.Background()
	const test = "chaos-leader"
	rounds, batch := 3, 10
	if long() {
		rounds = 10
	}
	createNamespace(t, test)
	h := newHook(t)

	a := &replica{name: "composite-apiserver", isStack: true}
	b := &replica{name: "replica-b"}
	if err := b.start(ctx); err != nil {
		t.Fatal(err)
	}
	defer b.stop()
	createController(t, test, h.srv.URL)
	tr := track(t, test, test)

	parents, kills, midApply := 0, 0, 0
	// A round ends with a leader killed in the middle of applying a batch
	// of parents' children; a kill that came too late does not count, and
	// the round is played again.
	for midApply < rounds {
		if kills == 2*rounds {
			t.Fatalf("%d kills, only %d of them mid-apply: the loop applies too fast for this test", kills, midApply)
		}
		var leader *replica
		if err := retry(ctx, "a leader", func(ctx context.Context) error {
			var err error
			if leader, err = holder(ctx, a, b); err == nil && leader == nil {
				err = fmt.Errorf("no live replica holds the Lease")
			}
			return err
		}); err != nil {
			t.Fatal(err)
		}
		// A batch of parents, created at once, and the leader killed as
		// soon as the tracker has seen a quarter of their children.
		first := parents
		parents += batch
		var wg sync.WaitGroup
		errs := make(chan error, batch)
		for i := first; i < parents; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs <- createParentRetrying(ctx, test, fmt.Sprintf("p%03d", i), test)
			}()
		}
		total := batch * children
		ours := func(name string) bool {
			var n int
			_, err := fmt.Sscanf(name, "p%03d-", &n)
			return err == nil && n >= first
		}
		deadline := time.Now().Add(2 * time.Minute)
		for tr.count(ours) < total/4 {
			if time.Now().After(deadline) {
				t.Fatalf("the leader applied %d of the batch's %d children in 2 minutes", tr.count(ours), total)
			}
			time.Sleep(5 * time.Millisecond)
		}
		leader.kill()
		kills++
		// What the dead leader applied, read before the other replica can
		// take over (its lease runs 4 s).
		var applied int
		if err := retry(ctx, "the batch's children", func(ctx context.Context) error {
			cms, err := c.kube.CoreV1().ConfigMaps(test).List(ctx, metav1.ListOptions{LabelSelector: "test=" + test})
			applied = 0
			for _, cm := range cms.Items {
				if ours(cm.Name) {
					applied++
				}
			}
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if applied < total {
			midApply++
		}
		t.Logf("kill %d: killed the leader, %s, with %d of the batch's %d children applied", kills, leader.name, applied, total)
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		if err := leader.start(ctx); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%d leaders killed, %d of them mid-apply; %d hook calls", kills, midApply, h.calls.Load())
	waitConverged(t, test, test, parents, tr, 2*time.Minute)
	servedAgain(t, test)
}
