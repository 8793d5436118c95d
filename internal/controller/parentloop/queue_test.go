package parentloop

import (
	"fmt"
	"math/rand"
	"reflect"
	"testing"
	"time"

	"k8s.io/client-go/util/workqueue"
)

func TestLanes(t *testing.T) {
	urgent := map[string]bool{}
	q := newLanes(func(k string) bool { return urgent[k] })
	pop := func() []string {
		var out []string
		for q.Len() > 0 {
			out = append(out, q.Pop())
		}
		return out
	}

	// Unsynced specs first, each lane in arrival order.
	urgent["new1"], urgent["new2"] = true, true
	for _, k := range []string{"echo1", "new1", "echo2", "new2"} {
		q.Push(k)
	}
	if got := pop(); !reflect.DeepEqual(got, []string{"new1", "new2", "echo1", "echo2"}) {
		t.Errorf("order %v", got)
	}

	// A parent waiting among the rest whose spec changes moves up, once.
	q.Push("a")
	q.Push("b")
	urgent["b"] = true
	q.Touch("b")
	q.Touch("b")
	if q.Len() != 2 {
		t.Errorf("len %d, want 2", q.Len())
	}
	if got := pop(); !reflect.DeepEqual(got, []string{"b", "a"}) {
		t.Errorf("order %v", got)
	}

	// A moved key queued again after it was processed is served once
	// more, not dropped with its stale entry.
	urgent["c"] = false
	q.Push("c")
	urgent["c"] = true
	q.Touch("c")
	if k := q.Pop(); k != "c" {
		t.Fatalf("popped %s", k)
	}
	urgent["c"] = false
	q.Push("c")
	if got := pop(); !reflect.DeepEqual(got, []string{"c"}) {
		t.Errorf("after a move, %v", got)
	}
}

// Parents the loop is finishing go before new ones, and a finishing parent
// waiting among the rest moves up.
func TestFinishingParentsGoFirst(t *testing.T) {
	urgent, finishing := map[string]bool{}, map[string]bool{}
	q := &lanes{urgent: func(k string) bool { return urgent[k] }, finishing: func(k string) bool { return finishing[k] }, inFirst: map[string]bool{}, inRest: map[string]uint64{}}
	urgent["new1"], urgent["new2"], urgent["done1"] = true, true, true
	finishing["done1"], finishing["done2"] = true, true
	for _, k := range []string{"echo1", "new1", "done1", "new2", "done2", "late"} {
		q.Push(k)
	}
	finishing["late"] = true
	q.Touch("late")
	var got []string
	for q.Len() > 0 {
		got = append(got, q.Pop())
	}
	if !reflect.DeepEqual(got, []string{"done1", "done2", "late", "new1", "new2", "echo1"}) {
		t.Errorf("order %v", got)
	}
}

// Through client-go's workqueue: deduplication and Touch work with lanes.
func TestLanesInWorkqueue(t *testing.T) {
	urgent := map[string]bool{"new": true}
	wq := workqueue.NewTypedWithConfig[string](workqueue.TypedQueueConfig[string]{Queue: newLanes(func(k string) bool { return urgent[k] })})
	defer wq.ShutDown()
	for _, k := range []string{"old1", "old2", "new", "old1"} {
		wq.Add(k)
	}
	var got []string
	for i := 0; i < 3; i++ {
		k, _ := wq.Get()
		got = append(got, k)
		wq.Done(k)
	}
	if !reflect.DeepEqual(got, []string{"new", "old1", "old2"}) {
		t.Errorf("order %v", got)
	}
	done := make(chan struct{})
	go func() { defer close(done); wq.Get() }()
	select {
	case <-done:
		t.Error("an empty queue handed out an item")
	case <-time.After(50 * time.Millisecond):
	}
}

// The sequence from the review (C2), through the parents' own workqueue: a
// key moved to the first lane twice around a sync leaves two entries of it
// in the rest lane, and neither may reach a second worker while the key is
// being processed.
func TestLanesNeverHandOutAKeyBeingProcessed(t *testing.T) {
	urgent := map[string]bool{}
	wq := newParentQueue("test", func(k string) bool { return urgent[k] }, nil, nil)
	defer wq.ShutDown()
	get := func(want string) {
		t.Helper()
		if k, _ := wq.Get(); k != want {
			t.Fatalf("Get handed out %q, want %q", k, want)
		}
	}
	wantLen := func(want int) {
		t.Helper()
		if n := wq.Len(); n != want {
			t.Fatalf("Len %d, want %d", n, want)
		}
	}

	wq.Add("k") // waits in the rest lane
	urgent["k"] = true
	wq.Add("k") // touched into the first lane
	wantLen(1)
	get("k")
	wq.Done("k")
	wantLen(0)
	urgent["k"] = false
	wq.Add("k") // queued in the rest lane again
	urgent["k"] = true
	wq.Add("k") // touched again
	wantLen(1)
	get("k") // a worker processes k
	wantLen(0)
	// Another worker must get the next key, not k again.
	urgent["other"] = false
	wq.Add("other")
	wantLen(1)
	get("other")
	wq.Done("other")
	wq.Done("k")
	wantLen(0)
}

// Random adds (urgent or not), gets and dones over many keys, against a
// model of the workqueue's promise: a key is handed out to one worker at a
// time, every key added is handed out after it, and Len counts the keys
// queued and not being processed.
func TestLanesRandomizedKeepTheWorkqueuePromise(t *testing.T) {
	for seed := int64(1); seed <= 20; seed++ {
		rng := rand.New(rand.NewSource(seed))
		urgent := map[string]bool{}
		wq := newParentQueue("test", func(k string) bool { return urgent[k] }, nil, nil)
		keys := make([]string, 12)
		for i := range keys {
			keys[i] = fmt.Sprintf("ns/p%d", i)
		}
		// dirty: added since last handed out; processing: handed out,
		// not done. Queued are the dirty keys not being processed.
		dirty, processing := map[string]bool{}, map[string]bool{}
		queued := func() int {
			n := 0
			for k := range dirty {
				if !processing[k] {
					n++
				}
			}
			return n
		}
		checkLen := func(step int) {
			if n, want := wq.Len(), queued(); n != want {
				t.Fatalf("seed %d step %d: Len %d, want %d", seed, step, n, want)
			}
		}
		get := func(step int) {
			// Checked before Get too, which would block on a queue
			// whose Len is 0 and read past its lanes on one whose Len
			// is too large.
			checkLen(step)
			if queued() == 0 {
				return
			}
			k, _ := wq.Get()
			if processing[k] {
				t.Fatalf("seed %d step %d: %s handed out while being processed", seed, step, k)
			}
			if !dirty[k] {
				t.Fatalf("seed %d step %d: %s handed out, not added since", seed, step, k)
			}
			delete(dirty, k)
			processing[k] = true
		}
		done := func() {
			for k := range processing {
				delete(processing, k)
				wq.Done(k)
				return
			}
		}
		for step := 0; step < 5000; step++ {
			switch r := rng.Intn(10); {
			case r < 5:
				k := keys[rng.Intn(len(keys))]
				urgent[k] = rng.Intn(2) == 0
				wq.Add(k)
				dirty[k] = true
			case r < 8:
				get(step)
			default:
				done()
			}
			checkLen(step)
		}
		// Drain: every key added is handed out, none is lost.
		for step := 0; len(dirty)+len(processing) > 0; step++ {
			if step > 10*len(keys) {
				t.Fatalf("seed %d: never handed out %v", seed, dirty)
			}
			for len(processing) > 0 {
				done()
			}
			get(-1)
		}
		if n := wq.Len(); n != 0 {
			t.Fatalf("seed %d: Len %d after draining", seed, n)
		}
		wq.ShutDown()
	}
}
