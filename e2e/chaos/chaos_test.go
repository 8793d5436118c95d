package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"
)

// TestKillsWhileParentsConverge kills (SIGKILL) kube-apiserver twice, etcd
// twice and composite-apiserver five times, in a random order at random
// moments, each started again after a random downtime, while parents are
// being created and their specs changed: 40 parents (300 with
// COMPOSITE_E2E_LONG=1) of 3 ConfigMaps each. Afterwards every parent is
// converged (status of its last spec, for its generation), each child
// exists exactly once with exactly one controller reference, its parent's,
// and no child was ever deleted or recreated: an update changes each in
// place.
func TestKillsWhileParentsConverge(t *testing.T) {
	setUp(t)
	r := seeded(t)
	ctx := context.Background()
	const test = "chaos-converge"
	parents, window := 40, 40*time.Second
	if long() {
		parents, window = 300, 90*time.Second
	}
	createNamespace(t, test)
	h := newHook(t)
	createController(t, test, h.srv.URL)
	tr := track(t, test, test)

	// The work: parents created one after the other over the window, and
	// specs changed now and then, each retried until it goes through.
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		created []string
		updates int
		workErr error
	)
	done := make(chan struct{})
	wg.Add(2)
	go func() {
		defer wg.Done()
		interval := window / time.Duration(parents)
		for i := 0; i < parents; i++ {
			name := fmt.Sprintf("p%03d", i)
			if err := createParentRetrying(ctx, test, name, test); err != nil {
				mu.Lock()
				workErr = err
				mu.Unlock()
				return
			}
			mu.Lock()
			created = append(created, name)
			mu.Unlock()
			time.Sleep(interval)
		}
	}()
	go func() {
		defer wg.Done()
		ur := rand.New(rand.NewPCG(r.Uint64(), r.Uint64()))
		for {
			select {
			case <-done:
				return
			case <-time.After(time.Duration(300+ur.IntN(700)) * time.Millisecond):
			}
			mu.Lock()
			if len(created) == 0 {
				mu.Unlock()
				continue
			}
			name := created[ur.IntN(len(created))]
			mu.Unlock()
			if err := bumpVersion(ctx, test, name); err != nil {
				mu.Lock()
				workErr = err
				mu.Unlock()
				return
			}
			mu.Lock()
			updates++
			mu.Unlock()
		}
	}()

	// The chaos, over the same window.
	events := []string{"kube-apiserver", "kube-apiserver", "etcd", "etcd"}
	for i := 0; i < 5; i++ {
		events = append(events, "composite-apiserver")
	}
	r.Shuffle(len(events), func(i, j int) { events[i], events[j] = events[j], events[i] })
	gap := window / time.Duration(len(events)+1)
	start := time.Now()
	counts := map[string]int{}
	for _, what := range events {
		time.Sleep(gap/2 + time.Duration(r.Int64N(int64(gap))))
		downtime := time.Duration(r.IntN(1500)) * time.Millisecond
		at := time.Since(start)
		restarted, err := kill(ctx, what, downtime)
		if err != nil {
			t.Fatalf("%s, killed at %s: %v", what, at.Round(time.Millisecond), err)
		}
		counts[what]++
		mu.Lock()
		t.Logf("%6s: killed %s, down %s, back after %s (%d parents created, %d updates so far)",
			at.Round(100*time.Millisecond), what, downtime, restarted.Round(100*time.Millisecond), len(created), updates)
		mu.Unlock()
	}
	close(done)
	wg.Wait()
	if workErr != nil {
		t.Fatal(workErr)
	}
	t.Logf("chaos over after %s: kills %v; %d parents created, %d spec updates, %d hook calls",
		time.Since(start).Round(100*time.Millisecond), counts, len(created), updates, h.calls.Load())

	waitConverged(t, test, test, parents, tr, 3*time.Minute)
	servedAgain(t, test)
}

// kill kills one process of the stack, waits downtime, starts it again
// and waits until it (and what depends on it) is ready; it returns how long
// that took from the kill.
func kill(ctx context.Context, what string, downtime time.Duration) (time.Duration, error) {
	start := time.Now()
	switch what {
	case "etcd":
		suite.KillEtcd()
		time.Sleep(downtime)
		if err := suite.RestartEtcd(ctx); err != nil {
			return 0, err
		}
		// kube-apiserver's readiness includes etcd's: a restart of
		// composite-apiserver next needs kube-apiserver.
		if err := waitKubeAPIServer(ctx); err != nil {
			return 0, err
		}
	case "kube-apiserver":
		suite.KillKubeAPIServer()
		time.Sleep(downtime)
		if err := suite.RestartKubeAPIServer(ctx); err != nil {
			return 0, err
		}
	case "composite-apiserver":
		suite.KillComposite()
		time.Sleep(downtime)
		if err := suite.StartComposite(ctx); err != nil {
			return 0, err
		}
	default:
		return 0, fmt.Errorf("can't kill %s", what)
	}
	return time.Since(start), nil
}

func waitKubeAPIServer(ctx context.Context) error {
	return retry(ctx, "kube-apiserver ready", func(ctx context.Context) error {
		_, err := c.kube.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		return err
	})
}
