package controller

import (
	"fmt"
	"testing"
	"time"
)

func cm(name string) childID { return childID{kind: "ConfigMap", namespace: "ns", name: name} }

// created are the writes of a sync that created n ConfigMaps c0..c<n-1>
// at resourceVersions 10.. and wrote the parent's status at 100.
func created(n int) *syncWrites {
	w := &syncWrites{parent: []parentWrite{{resourceVersion: "100", answer: true}}}
	for i := 0; i < n; i++ {
		w.children = append(w.children, childWrite{id: cm(fmt.Sprintf("c%d", i)), resourceVersion: fmt.Sprint(10 + i)})
	}
	return w
}

// The child echoes alone, with the status echo ignored
// (spec.ownStatusWrites: Ignore).
func TestTheEchoesOfASyncsWritesQueueTheParentOnceAfterTheLast(t *testing.T) {
	w := newOwnWrites(time.Minute, true, false)
	w.begin("ns/p")
	if again, waiting := w.finish("ns/p", created(3)); again || !waiting {
		t.Fatalf("finish = %v, %v; want nothing queued, echoes awaited", again, waiting)
	}
	if w.parentEvent("ns/p", "100", true) {
		t.Fatal("the echo of the parent's status write queued it")
	}
	for i := 0; i < 2; i++ {
		if w.childEvent("ns/p", cm(fmt.Sprintf("c%d", i)), fmt.Sprint(10+i), false, false) {
			t.Fatalf("the echo of child c%d queued the parent before the last one", i)
		}
	}
	if !w.childEvent("ns/p", cm("c2"), "12", false, false) {
		t.Fatal("the last child's echo did not queue the parent: a hook reporting its children would never see them all")
	}
	if len(w.parents) != 0 {
		t.Fatalf("still waiting for %v", w.parents["ns/p"])
	}
	// The sync that follows sees them all and writes only the status.
	w.begin("ns/p")
	if again, waiting := w.finish("ns/p", &syncWrites{parent: []parentWrite{{resourceVersion: "101", answer: true}}}); again || !waiting {
		t.Fatalf("finish = %v, %v", again, waiting)
	}
	if w.parentEvent("ns/p", "101", true) {
		t.Fatal("the echo of the second status write queued the parent")
	}
	if !w.parentEvent("ns/p", "102", true) {
		t.Fatal("someone else's change of the parent did not queue it")
	}
}

func TestEchoesThatArriveDuringTheSyncAreMatchedWhenItEnds(t *testing.T) {
	w := newOwnWrites(time.Minute, true, false)
	w.begin("ns/p")
	for i := 0; i < 2; i++ {
		if w.childEvent("ns/p", cm(fmt.Sprintf("c%d", i)), fmt.Sprint(10+i), false, false) {
			t.Fatal("an event during the sync queued the parent")
		}
	}
	if w.parentEvent("ns/p", "100", true) {
		t.Fatal("an event during the sync queued the parent")
	}
	again, waiting := w.finish("ns/p", created(2))
	if !again || waiting {
		t.Fatalf("finish = %v, %v; want the parent queued once (its hook has not seen its children) and nothing awaited", again, waiting)
	}
}

func TestAChangeThatIsNoEchoQueuesTheParent(t *testing.T) {
	w := newOwnWrites(time.Minute, true, false)
	w.begin("ns/p")
	// During the sync, someone else edits c0 after the loop's write.
	w.childEvent("ns/p", cm("c0"), "10", false, false)
	w.childEvent("ns/p", cm("c0"), "50", false, false)
	if again, _ := w.finish("ns/p", created(2)); !again {
		t.Fatal("a change by someone else during the sync did not queue the parent")
	}
	// After it, someone edits c1 before its echo arrived.
	if !w.childEvent("ns/p", cm("c1"), "51", false, false) {
		t.Fatal("a change by someone else did not queue the parent")
	}
	// A child the loop never wrote.
	if !w.childEvent("ns/p", cm("other"), "52", false, false) {
		t.Fatal("a change of a child the loop did not write did not queue the parent")
	}
	// A parent nobody awaits anything of behaves as without ownWrites.
	if !w.childEvent("ns/q", cm("c0"), "10", false, false) || !w.parentEvent("ns/q", "1", true) || w.parentEvent("ns/q", "1", false) {
		t.Fatal("events of a parent without writes are not queued as they were")
	}
}

func TestADeletionsEchoIsTheChildGone(t *testing.T) {
	w := newOwnWrites(time.Minute, true, false)
	w.begin("ns/p")
	w.finish("ns/p", &syncWrites{children: []childWrite{{id: cm("old")}}})
	if !w.childEvent("ns/p", cm("old"), "60", false, false) {
		t.Fatal("an update of a child the loop deleted, not being deleted, is no echo")
	}
	w.begin("ns/p")
	w.finish("ns/p", &syncWrites{children: []childWrite{{id: cm("old")}}})
	if !w.childEvent("ns/p", cm("old"), "61", true, false) {
		t.Fatal("the deletion's echo did not queue the parent: the hook must see its child gone")
	}
	if len(w.parents) != 0 {
		t.Fatal("still waiting after the last echo")
	}
}

func TestAFailedSyncWaitsForNothing(t *testing.T) {
	w := newOwnWrites(time.Minute, true, false)
	w.begin("ns/p")
	w.childEvent("ns/p", cm("c0"), "10", false, false)
	if again, waiting := w.finish("ns/p", nil); again || waiting {
		t.Fatalf("finish of a failed sync = %v, %v; its retry reads everything again", again, waiting)
	}
	if !w.childEvent("ns/p", cm("c1"), "11", false, false) {
		t.Fatal("after a failed sync an event did not queue the parent")
	}
}

func TestAnEchoThatNeverArrivesIsGivenUp(t *testing.T) {
	now := time.Unix(1000, 0)
	w := newOwnWrites(time.Minute, true, false)
	w.now = func() time.Time { return now }
	w.begin("ns/p")
	w.finish("ns/p", created(2))
	w.childEvent("ns/p", cm("c0"), "10", false, false)
	if w.expire("ns/p") {
		t.Fatal("expired before the deadline")
	}
	now = now.Add(time.Minute)
	if !w.expire("ns/p") {
		t.Fatal("a lost echo did not sync the parent after the deadline")
	}
	if len(w.parents) != 0 {
		t.Fatal("still waiting after the deadline")
	}
}

func TestIgnoredStatusChangesOfOthersQueueNothing(t *testing.T) {
	w := newOwnWrites(time.Minute, true, false)
	w.begin("ns/p")
	w.parentEvent("ns/p", "7", false)
	if again, _ := w.finish("ns/p", &syncWrites{parent: []parentWrite{{resourceVersion: "100", answer: true}}}); again {
		t.Fatal("a change the controller ignores queued the parent")
	}
}

func TestWithOwnChildWritesIgnoredTheEchoesSyncNothing(t *testing.T) {
	w := newOwnWrites(time.Minute, false, false)
	w.begin("ns/p")
	w.childEvent("ns/p", cm("c0"), "10", false, false)
	if again, waiting := w.finish("ns/p", created(2)); again || !waiting {
		t.Fatalf("finish = %v, %v", again, waiting)
	}
	if w.childEvent("ns/p", cm("c1"), "11", false, false) || w.parentEvent("ns/p", "100", true) {
		t.Fatal("an echo synced the parent of a controller that ignores its own child writes")
	}
	if len(w.parents) != 0 {
		t.Fatal("still waiting after the last echo")
	}
	if !w.childEvent("ns/p", cm("c1"), "12", false, false) {
		t.Fatal("someone else's change did not sync the parent")
	}
}

func TestTheStatusIsLeftToTheNextSyncOnlyOnceInARow(t *testing.T) {
	w := newOwnWrites(time.Minute, true, false)
	if w.begin("ns/p") {
		t.Fatal("a first sync is told the last one left it the status")
	}
	writes := created(1)
	writes.parent, writes.statusDeferred = nil, true
	w.finish("ns/p", writes)
	if !w.childEvent("ns/p", cm("c0"), "10", false, false) {
		t.Fatal("the echo did not sync the parent whose status waits for it")
	}
	if !w.begin("ns/p") {
		t.Fatal("the sync after a deferred status is not told to write it")
	}
	w.finish("ns/p", &syncWrites{parent: []parentWrite{{resourceVersion: "101", answer: true}}})
	if w.begin("ns/p") {
		t.Fatal("told twice")
	}
}

// answered is a sync that wrote the hook's answer to the parent at
// resourceVersion rv, and no child.
func answered(rv string) *syncWrites {
	return &syncWrites{parent: []parentWrite{{resourceVersion: rv, answer: true}}}
}

func TestTheEchoOfTheHooksAnswerSyncsTheParentOnce(t *testing.T) {
	w := newOwnWrites(time.Minute, true, true)
	w.begin("ns/p")
	if again, waiting := w.finish("ns/p", answered("100")); again || !waiting {
		t.Fatalf("finish = %v, %v; want nothing queued, the echo awaited", again, waiting)
	}
	if !w.parentEvent("ns/p", "100", true) {
		t.Fatal("the echo of the hook's status did not sync the parent: a hook that reads its own status would stall (Metacontroller syncs it)")
	}
	if !w.isFinishing("ns/p") {
		t.Fatal("the sync that lets the hook see its status is not served first")
	}
	// The hook sees its status and answers the same: nothing is written,
	// and nothing more is awaited.
	w.begin("ns/p")
	if again, waiting := w.finish("ns/p", &syncWrites{}); again || waiting {
		t.Fatalf("finish of a converged sync = %v, %v; want nothing", again, waiting)
	}
	if !w.parentEvent("ns/p", "101", true) {
		t.Fatal("someone else's change did not sync the parent")
	}
}

func TestChildAndStatusEchoesSyncTheParentOnceAfterTheLast(t *testing.T) {
	for _, statusFirst := range []bool{true, false} {
		w := newOwnWrites(time.Minute, true, true)
		w.begin("ns/p")
		w.finish("ns/p", created(2))
		var queued []string
		event := func(name string, queue bool) {
			if queue {
				queued = append(queued, name)
			}
		}
		if statusFirst {
			event("status", w.parentEvent("ns/p", "100", true))
		}
		event("c0", w.childEvent("ns/p", cm("c0"), "10", false, false))
		event("c1", w.childEvent("ns/p", cm("c1"), "11", false, false))
		if !statusFirst {
			event("status", w.parentEvent("ns/p", "100", true))
		}
		want := "[c1]"
		if !statusFirst {
			want = "[status]"
		}
		if fmt.Sprint(queued) != want {
			t.Errorf("status echo first %v: the parent was queued by %v; want once, by the last echo %s", statusFirst, queued, want)
		}
	}
}

func TestTheEchoOfTheHooksAnswerDuringTheSyncQueuesTheParentWhenItEnds(t *testing.T) {
	w := newOwnWrites(time.Minute, true, true)
	w.begin("ns/p")
	if w.parentEvent("ns/p", "100", true) {
		t.Fatal("an event during the sync queued the parent")
	}
	if again, waiting := w.finish("ns/p", answered("100")); !again || waiting {
		t.Fatalf("finish = %v, %v; want the parent queued once for its status echo, nothing awaited", again, waiting)
	}
}

func TestTheStatusEchoesThatSyncNothing(t *testing.T) {
	for _, tc := range []struct {
		name         string
		syncOnStatus bool
		write        parentWrite
		wanted       bool
	}{
		{"spec.ownStatusWrites: Ignore", false, parentWrite{resourceVersion: "100", answer: true}, true},
		{"the finalizer's write: the sync went on with the parent it stored", true, parentWrite{resourceVersion: "100"}, true},
		{"a status change the controller ignores (ignoreStatusChanges)", true, parentWrite{resourceVersion: "100", answer: true}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newOwnWrites(time.Minute, true, tc.syncOnStatus)
			w.begin("ns/p")
			w.finish("ns/p", &syncWrites{parent: []parentWrite{tc.write}})
			if w.parentEvent("ns/p", "100", tc.wanted) {
				t.Fatal("the echo synced the parent")
			}
			if len(w.parents) != 0 {
				t.Fatal("still waiting after the echo")
			}
		})
	}
}
