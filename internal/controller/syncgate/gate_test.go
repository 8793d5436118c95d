package syncgate

import (
	"context"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var hellosGR = schema.GroupResource{Group: "example.com", Resource: "hellos"}

// TestALiveSyncIsAdmittedWhereTheLoopSyncsTheParent: a live /sync runs on
// a replica that runs no loop or the loop for every parent, on the leader
// while it leads, and on the owner of the parent's shard; elsewhere it is
// refused with 503 and a message that says why and what to do.
func TestALiveSyncIsAdmittedWhereTheLoopSyncsTheParent(t *testing.T) {
	leading, stopLeading := context.WithCancel(context.Background())
	defer stopLeading()
	cases := []struct {
		name    string
		gate    func() *Gate
		refused string
	}{
		{name: "no loop, or one for every parent", gate: NewGate},
		{name: "leader election, not leading", gate: func() *Gate {
			g := NewGate()
			g.LeaderElected()
			return g
		}, refused: "is not the leader"},
		{name: "leader election, leading", gate: func() *Gate {
			g := NewGate()
			g.LeaderElected()
			go g.Lead(leading, func(ctx context.Context) { <-ctx.Done() })
			for {
				g.mu.Lock()
				leading := g.leading
				g.mu.Unlock()
				if leading {
					return g
				}
				time.Sleep(time.Millisecond)
			}
		}},
		{name: "shards, before joining", gate: func() *Gate {
			g := NewGate()
			g.Sharded(nil)
			return g
		}, refused: "does not own the shard"},
		{name: "shards, another replica's", gate: func() *Gate {
			g := NewGate()
			g.Sharded(&ownedKeys{owned: map[string]bool{"ns/other": true}})
			return g
		}, refused: "does not own the shard"},
		{name: "shards, this replica's", gate: func() *Gate {
			g := NewGate()
			g.Sharded(&ownedKeys{owned: map[string]bool{"ns/p": true}})
			return g
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, done, err := tc.gate().AdmitLive(context.Background(), hellosGR, "ns/p")
			if tc.refused == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				done()
				return
			}
			if !apierrors.IsServiceUnavailable(err) || !strings.Contains(err.Error(), tc.refused) || !strings.Contains(err.Error(), "send it again") {
				t.Fatalf("got %v, want a 503 saying %q and what to do", err, tc.refused)
			}
		})
	}
}

// TestALiveSyncAndTheLoopTakeTurnsOnAParent: a live sync waits for the
// worker's sync of the parent to end, the worker's next sync waits for the
// live one, and other parents do not wait.
func TestALiveSyncAndTheLoopTakeTurnsOnAParent(t *testing.T) {
	g := NewGate()
	ctx := context.Background()
	give, err := g.Turn(ctx, hellosGR, "ns/p")
	if err != nil {
		t.Fatal(err)
	}
	admitted := make(chan func())
	go func() {
		_, done, err := g.AdmitLive(ctx, hellosGR, "ns/p")
		if err != nil {
			t.Error(err)
		}
		admitted <- done
	}()
	other, err := g.Turn(ctx, hellosGR, "ns/q")
	if err != nil {
		t.Fatalf("another parent waited: %v", err)
	}
	other()
	select {
	case <-admitted:
		t.Fatal("a live sync began while the worker's sync of the parent ran")
	case <-time.After(50 * time.Millisecond):
	}
	give()
	done := <-admitted
	waiting, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := g.Turn(waiting, hellosGR, "ns/p"); err == nil {
		t.Fatal("the worker began a sync of the parent while a live one ran")
	}
	done()
	if give, err = g.Turn(ctx, hellosGR, "ns/p"); err != nil {
		t.Fatal(err)
	}
	give()
}

// TestALeadershipTermEndsAfterItsLiveSyncs: the leader's term (and so its
// Lease) ends only once the live syncs it admitted have ended, and their
// context ends with the term.
func TestALeadershipTermEndsAfterItsLiveSyncs(t *testing.T) {
	g := NewGate()
	g.LeaderElected()
	term, end := context.WithCancel(context.Background())
	started, ended := make(chan struct{}), make(chan struct{})
	go func() {
		g.Lead(term, func(ctx context.Context) { close(started); <-ctx.Done() })
		close(ended)
	}()
	<-started
	syncCtx, done, err := g.AdmitLive(context.Background(), hellosGR, "ns/p")
	if err != nil {
		t.Fatal(err)
	}
	end()
	<-syncCtx.Done()
	select {
	case <-ended:
		t.Fatal("the term ended while a live sync it admitted ran")
	case <-time.After(50 * time.Millisecond):
	}
	done()
	<-ended
	if _, _, err := g.AdmitLive(context.Background(), hellosGR, "ns/p"); !apierrors.IsServiceUnavailable(err) {
		t.Errorf("admitted after the term: %v", err)
	}
}

// TestALiveSyncGoesBeforeTheLoopsNextSync: when the loop's sync of a
// parent ends while a live sync and the loop's next sync of it both wait,
// the live sync goes first, every time: a loop that syncs a parent again
// and again must not take the turn back each time it is given, and leave a
// live /sync waiting past its deadline. (Before, both woke and raced: the
// loop won about half the rounds.)
func TestALiveSyncGoesBeforeTheLoopsNextSync(t *testing.T) {
	g := NewGate()
	ctx := context.Background()
	for round := 0; round < 50; round++ {
		give, err := g.Turn(ctx, hellosGR, "ns/p")
		if err != nil {
			t.Fatal(err)
		}
		admitted := make(chan func(), 1)
		go func() {
			_, done, err := g.AdmitLive(ctx, hellosGR, "ns/p")
			if err != nil {
				t.Error(err)
			}
			admitted <- done
		}()
		next := make(chan func(), 1)
		go func() {
			give, err := g.Turn(ctx, hellosGR, "ns/p")
			if err != nil {
				t.Error(err)
			}
			next <- give
		}()
		// Both wait for the turn before it is given back.
		time.Sleep(10 * time.Millisecond)
		give()
		var done func()
		select {
		case done = <-admitted:
		case give := <-next:
			t.Fatalf("round %d: the loop's next sync took the turn before the waiting live sync", round)
			give()
			return
		}
		select {
		case <-next:
			t.Fatalf("round %d: the loop's sync began while the live sync ran", round)
		default:
		}
		done()
		(<-next)()
	}
}
