package controllerstatus

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
	"github.com/composite-apiserver/composite-apiserver/internal/controller/parentloop"
)

// The status is written every interval while counting the controller's
// parents and children is cheap, and less often once a count would take
// more than countingShare of a core at that rate: a count of 0.1 s (10,000
// parents × 10 children on a busy machine) every 10 s, not every 5 s.
func TestPaceBoundsTheShareOfACoreSpentCounting(t *testing.T) {
	for _, tc := range []struct {
		interval, took, want time.Duration
	}{
		{5 * time.Second, 0, 5 * time.Second},
		{5 * time.Second, time.Millisecond, 5 * time.Second},
		{5 * time.Second, 50 * time.Millisecond, 5 * time.Second},
		{5 * time.Second, 100 * time.Millisecond, 10 * time.Second},
		{5 * time.Second, 300 * time.Millisecond, 30 * time.Second},
		{time.Second, 20 * time.Millisecond, 2 * time.Second},
	} {
		if got := pace(tc.interval, tc.took); got != tc.want {
			t.Errorf("pace(%v, %v) = %v, want %v", tc.interval, tc.took, got, tc.want)
		}
	}
}

// fakeStore keeps the status the tracker writes.
type fakeStore struct {
	mu     sync.Mutex
	status Status
}

func (f *fakeStore) Mutate(_ context.Context, _ string, _ types.UID, change func(*Status)) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	change(&f.status)
	return nil
}

func (f *fakeStore) get() Status {
	f.mu.Lock()
	defer f.mu.Unlock()
	st := f.status
	st.Conditions = slices.Clone(st.Conditions)
	return st
}

// fakeClock is real time moved on by what the test says, as a count that
// takes that long would.
type fakeClock struct {
	mu     sync.Mutex
	offset time.Duration
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.offset)
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.offset += d
}

// waitFor polls the store until ok holds of its status, failing after
// timeout: far less than the counts' pace, far more than an interval.
func waitFor(t *testing.T, store *fakeStore, what string, ok func(Status) bool) Status {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		st := store.get()
		if ok(st) {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s was not written within 5 s (intervals of 10 ms); status: %+v", what, st)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// A count that takes 10 s (a loaded machine among many parents) is paced
// to one every 1000 s, but a failing sync or a panic is in the status
// within an interval or two, with the last counts; the counts are counted
// anew once their pace is over.
func TestSlowCountsDoNotHoldBackTheLastSyncErrorOrConditions(t *testing.T) {
	const interval = 10 * time.Millisecond
	store := &fakeStore{}
	clock := &fakeClock{}
	tr := New(&metav1.ObjectMeta{Name: "c", UID: "u", Generation: 1}, store, interval, 1)
	tr.clock = clock.now
	var counts atomic.Int32
	tr.Counts = func() parentloop.Counts {
		clock.advance(10 * time.Second)
		return parentloop.Counts{Parents: int(counts.Add(1))}
	}
	tr.Started("running")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); tr.Run(ctx) }()
	defer func() { cancel(); <-done }()

	waitFor(t, store, "the first status", func(st Status) bool { return st.Parents == 1 })
	tr.Synced("ns/p", errors.New("hook failed"))
	st := waitFor(t, store, "lastSyncError", func(st Status) bool { return st.LastSyncError == "hook failed" })
	if st.Parents != 1 {
		t.Errorf("parents = %d, want the first count's 1", st.Parents)
	}
	tr.Panicked("ns/p", errors.New("boom"))
	waitFor(t, store, "the Panicked condition", func(st Status) bool {
		c := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionReady)
		return c != nil && c.Reason == "Panicked"
	})
	if n := counts.Load(); n != 1 {
		t.Fatalf("counted %d times before the count's pace of 1000 s was over, want 1", n)
	}

	clock.advance(pace(interval, 10*time.Second))
	waitFor(t, store, "the next count", func(st Status) bool { return st.Parents == 2 })
	time.Sleep(5 * interval)
	if n := counts.Load(); n != 2 {
		t.Errorf("counted %d times after one pace, want 2", n)
	}
}

// TestLastSyncErrorStaysUntilTheFailingParentSyncs: a healthy parent's
// success does not hide a failing one's error; the error goes once every
// parent that failed has synced, and the latest failure is the one shown.
func TestLastSyncErrorStaysUntilTheFailingParentSyncs(t *testing.T) {
	tr := New(&metav1.ObjectMeta{Name: "c", UID: "u", Generation: 1}, &fakeStore{}, time.Second, 1)
	tr.Counts = func() parentloop.Counts { return parentloop.Counts{} }
	lastSyncError := func() string { return tr.desired().LastSyncError }

	tr.Synced("ns/failing", errors.New("can't list roles"))
	tr.Synced("ns/healthy", nil)
	if got := lastSyncError(); got != "can't list roles" {
		t.Fatalf("after a healthy parent's success, lastSyncError = %q, want the failing parent's", got)
	}
	tr.Synced("ns/other", errors.New("hook timed out"))
	if got := lastSyncError(); got != "hook timed out" {
		t.Fatalf("lastSyncError = %q, want the latest failure", got)
	}
	tr.Synced("ns/other", nil)
	if got := lastSyncError(); got != "can't list roles" {
		t.Fatalf("once the latest failing parent synced, lastSyncError = %q, want the one still failing", got)
	}
	tr.Synced("ns/failing", nil)
	if got := lastSyncError(); got != "" {
		t.Fatalf("once every parent synced, lastSyncError = %q, want none", got)
	}
}
