package controller

import (
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
