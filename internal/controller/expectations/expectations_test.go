package expectations

import (
	"fmt"
	"testing"
	"time"
)

func cm(name string) Child { return Child{Kind: "ConfigMap", Namespace: "ns", Name: name} }

// created are the writes of a sync that created n ConfigMaps c0..c<n-1>
// at resourceVersions 10.. and wrote the parent's status at 100.
func created(n int) *Writes {
	w := &Writes{Parent: []ParentWrite{{ResourceVersion: "100", Answer: true}}}
	for i := 0; i < n; i++ {
		w.Children = append(w.Children, ChildWrite{Child: cm(fmt.Sprintf("c%d", i)), ResourceVersion: fmt.Sprint(10 + i)})
	}
	return w
}

// The child echoes alone, with the status echo ignored
// (spec.ownStatusWrites: Ignore).
func TestTheEchoesOfASyncsWritesQueueTheParentOnceAfterTheLast(t *testing.T) {
	w := New(time.Minute, true, false)
	w.Begin("ns/p")
	if again, waiting := w.Finish("ns/p", created(3)); again || !waiting {
		t.Fatalf("finish = %v, %v; want nothing queued, echoes awaited", again, waiting)
	}
	if w.ParentObserved("ns/p", "100", true) {
		t.Fatal("the echo of the parent's status write queued it")
	}
	for i := 0; i < 2; i++ {
		if w.ChildObserved("ns/p", cm(fmt.Sprintf("c%d", i)), fmt.Sprint(10+i), false, false) {
			t.Fatalf("the echo of child c%d queued the parent before the last one", i)
		}
	}
	if !w.ChildObserved("ns/p", cm("c2"), "12", false, false) {
		t.Fatal("the last child's echo did not queue the parent: a hook reporting its children would never see them all")
	}
	if len(w.parents) != 0 {
		t.Fatalf("still waiting for %v", w.parents["ns/p"])
	}
	// The sync that follows sees them all and writes only the status.
	w.Begin("ns/p")
	if again, waiting := w.Finish("ns/p", &Writes{Parent: []ParentWrite{{ResourceVersion: "101", Answer: true}}}); again || !waiting {
		t.Fatalf("finish = %v, %v", again, waiting)
	}
	if w.ParentObserved("ns/p", "101", true) {
		t.Fatal("the echo of the second status write queued the parent")
	}
	if !w.ParentObserved("ns/p", "102", true) {
		t.Fatal("someone else's change of the parent did not queue it")
	}
}

func TestEchoesThatArriveDuringTheSyncAreMatchedWhenItEnds(t *testing.T) {
	w := New(time.Minute, true, false)
	w.Begin("ns/p")
	for i := 0; i < 2; i++ {
		if w.ChildObserved("ns/p", cm(fmt.Sprintf("c%d", i)), fmt.Sprint(10+i), false, false) {
			t.Fatal("an event during the sync queued the parent")
		}
	}
	if w.ParentObserved("ns/p", "100", true) {
		t.Fatal("an event during the sync queued the parent")
	}
	again, waiting := w.Finish("ns/p", created(2))
	if !again || waiting {
		t.Fatalf("finish = %v, %v; want the parent queued once (its hook has not seen its children) and nothing awaited", again, waiting)
	}
}

func TestAChangeThatIsNoEchoQueuesTheParent(t *testing.T) {
	w := New(time.Minute, true, false)
	w.Begin("ns/p")
	// During the sync, someone else edits c0 after the loop's write.
	w.ChildObserved("ns/p", cm("c0"), "10", false, false)
	w.ChildObserved("ns/p", cm("c0"), "50", false, false)
	if again, _ := w.Finish("ns/p", created(2)); !again {
		t.Fatal("a change by someone else during the sync did not queue the parent")
	}
	// After it, someone edits c1 before its echo arrived.
	if !w.ChildObserved("ns/p", cm("c1"), "51", false, false) {
		t.Fatal("a change by someone else did not queue the parent")
	}
	// A child the loop never wrote.
	if !w.ChildObserved("ns/p", cm("other"), "52", false, false) {
		t.Fatal("a change of a child the loop did not write did not queue the parent")
	}
	// A parent nobody awaits anything of behaves as without expectations.
	if !w.ChildObserved("ns/q", cm("c0"), "10", false, false) || !w.ParentObserved("ns/q", "1", true) || w.ParentObserved("ns/q", "1", false) {
		t.Fatal("events of a parent without writes are not queued as they were")
	}
}

func TestADeletionsEchoIsTheChildGone(t *testing.T) {
	w := New(time.Minute, true, false)
	w.Begin("ns/p")
	w.Finish("ns/p", &Writes{Children: []ChildWrite{{Child: cm("old")}}})
	if !w.ChildObserved("ns/p", cm("old"), "60", false, false) {
		t.Fatal("an update of a child the loop deleted, not being deleted, is no echo")
	}
	w.Begin("ns/p")
	w.Finish("ns/p", &Writes{Children: []ChildWrite{{Child: cm("old")}}})
	if !w.ChildObserved("ns/p", cm("old"), "61", true, false) {
		t.Fatal("the deletion's echo did not queue the parent: the hook must see its child gone")
	}
	if len(w.parents) != 0 {
		t.Fatal("still waiting after the last echo")
	}
}

func TestAFailedSyncWaitsForNothing(t *testing.T) {
	w := New(time.Minute, true, false)
	w.Begin("ns/p")
	w.ChildObserved("ns/p", cm("c0"), "10", false, false)
	if again, waiting := w.Finish("ns/p", nil); again || waiting {
		t.Fatalf("finish of a failed sync = %v, %v; its retry reads everything again", again, waiting)
	}
	if !w.ChildObserved("ns/p", cm("c1"), "11", false, false) {
		t.Fatal("after a failed sync an event did not queue the parent")
	}
}

func TestAnEchoThatNeverArrivesIsGivenUp(t *testing.T) {
	now := time.Unix(1000, 0)
	w := New(time.Minute, true, false)
	w.now = func() time.Time { return now }
	w.Begin("ns/p")
	w.Finish("ns/p", created(2))
	w.ChildObserved("ns/p", cm("c0"), "10", false, false)
	if w.Expire("ns/p") {
		t.Fatal("expired before the deadline")
	}
	now = now.Add(time.Minute)
	if !w.Expire("ns/p") {
		t.Fatal("a lost echo did not sync the parent after the deadline")
	}
	if len(w.parents) != 0 {
		t.Fatal("still waiting after the deadline")
	}
}

func TestIgnoredStatusChangesOfOthersQueueNothing(t *testing.T) {
	w := New(time.Minute, true, false)
	w.Begin("ns/p")
	w.ParentObserved("ns/p", "7", false)
	if again, _ := w.Finish("ns/p", &Writes{Parent: []ParentWrite{{ResourceVersion: "100", Answer: true}}}); again {
		t.Fatal("a change the controller ignores queued the parent")
	}
}

func TestWithOwnChildWritesIgnoredTheEchoesSyncNothing(t *testing.T) {
	w := New(time.Minute, false, false)
	w.Begin("ns/p")
	w.ChildObserved("ns/p", cm("c0"), "10", false, false)
	if again, waiting := w.Finish("ns/p", created(2)); again || !waiting {
		t.Fatalf("finish = %v, %v", again, waiting)
	}
	if w.ChildObserved("ns/p", cm("c1"), "11", false, false) || w.ParentObserved("ns/p", "100", true) {
		t.Fatal("an echo synced the parent of a controller that ignores its own child writes")
	}
	if len(w.parents) != 0 {
		t.Fatal("still waiting after the last echo")
	}
	if !w.ChildObserved("ns/p", cm("c1"), "12", false, false) {
		t.Fatal("someone else's change did not sync the parent")
	}
}

func TestTheStatusIsLeftToTheNextSyncOnlyOnceInARow(t *testing.T) {
	w := New(time.Minute, true, false)
	if w.Begin("ns/p") {
		t.Fatal("a first sync is told the last one left it the status")
	}
	writes := created(1)
	writes.Parent, writes.StatusDeferred = nil, true
	w.Finish("ns/p", writes)
	if !w.ChildObserved("ns/p", cm("c0"), "10", false, false) {
		t.Fatal("the echo did not sync the parent whose status waits for it")
	}
	if !w.Begin("ns/p") {
		t.Fatal("the sync after a deferred status is not told to write it")
	}
	w.Finish("ns/p", &Writes{Parent: []ParentWrite{{ResourceVersion: "101", Answer: true}}})
	if w.Begin("ns/p") {
		t.Fatal("told twice")
	}
}

// answered is a sync that wrote the hook's answer to the parent at
// resourceVersion rv, and no child.
func answered(rv string) *Writes {
	return &Writes{Parent: []ParentWrite{{ResourceVersion: rv, Answer: true}}}
}

func TestTheEchoOfTheHooksAnswerSyncsTheParentOnce(t *testing.T) {
	w := New(time.Minute, true, true)
	w.Begin("ns/p")
	if again, waiting := w.Finish("ns/p", answered("100")); again || !waiting {
		t.Fatalf("finish = %v, %v; want nothing queued, the echo awaited", again, waiting)
	}
	if !w.ParentObserved("ns/p", "100", true) {
		t.Fatal("the echo of the hook's status did not sync the parent: a hook that reads its own status would stall (Metacontroller syncs it)")
	}
	if !w.Finishing("ns/p") {
		t.Fatal("the sync that lets the hook see its status is not served first")
	}
	// The hook sees its status and answers the same: nothing is written,
	// and nothing more is awaited.
	w.Begin("ns/p")
	if again, waiting := w.Finish("ns/p", &Writes{}); again || waiting {
		t.Fatalf("finish of a converged sync = %v, %v; want nothing", again, waiting)
	}
	if !w.ParentObserved("ns/p", "101", true) {
		t.Fatal("someone else's change did not sync the parent")
	}
}

func TestChildAndStatusEchoesSyncTheParentOnceAfterTheLast(t *testing.T) {
	for _, statusFirst := range []bool{true, false} {
		w := New(time.Minute, true, true)
		w.Begin("ns/p")
		w.Finish("ns/p", created(2))
		var queued []string
		event := func(name string, queue bool) {
			if queue {
				queued = append(queued, name)
			}
		}
		if statusFirst {
			event("status", w.ParentObserved("ns/p", "100", true))
		}
		event("c0", w.ChildObserved("ns/p", cm("c0"), "10", false, false))
		event("c1", w.ChildObserved("ns/p", cm("c1"), "11", false, false))
		if !statusFirst {
			event("status", w.ParentObserved("ns/p", "100", true))
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
	w := New(time.Minute, true, true)
	w.Begin("ns/p")
	if w.ParentObserved("ns/p", "100", true) {
		t.Fatal("an event during the sync queued the parent")
	}
	if again, waiting := w.Finish("ns/p", answered("100")); !again || waiting {
		t.Fatalf("finish = %v, %v; want the parent queued once for its status echo, nothing awaited", again, waiting)
	}
}

func TestTheStatusEchoesThatSyncNothing(t *testing.T) {
	for _, tc := range []struct {
		name         string
		syncOnStatus bool
		write        ParentWrite
		wanted       bool
	}{
		{"spec.ownStatusWrites: Ignore", false, ParentWrite{ResourceVersion: "100", Answer: true}, true},
		{"the finalizer's write: the sync went on with the parent it stored", true, ParentWrite{ResourceVersion: "100"}, true},
		{"a status change the controller ignores (ignoreStatusChanges)", true, ParentWrite{ResourceVersion: "100", Answer: true}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := New(time.Minute, true, tc.syncOnStatus)
			w.Begin("ns/p")
			w.Finish("ns/p", &Writes{Parent: []ParentWrite{tc.write}})
			if w.ParentObserved("ns/p", "100", tc.wanted) {
				t.Fatal("the echo synced the parent")
			}
			if len(w.parents) != 0 {
				t.Fatal("still waiting after the echo")
			}
		})
	}
}

// A parent that is gone waits for nothing: its echoes that arrive later
// are someone else's change, and it is no longer served first.
func TestAForgottenParentExpectsNothing(t *testing.T) {
	w := New(time.Minute, true, false)
	w.Begin("ns/p")
	w.Finish("ns/p", created(1))
	if !w.ChildObserved("ns/p", cm("c0"), "10", false, false) {
		t.Fatal("setup: the echo of the only child write did not queue the parent")
	}
	w.Begin("ns/p")
	w.Finish("ns/p", created(1))
	w.Forget("ns/p")
	if len(w.parents) != 0 || len(w.deferred) != 0 || len(w.finishing) != 0 {
		t.Fatalf("forgotten parent still tracked: %v %v %v", w.parents, w.deferred, w.finishing)
	}
	if w.Finishing("ns/p") {
		t.Error("a forgotten parent is still served first")
	}
	if !w.ChildObserved("ns/p", cm("c0"), "10", false, false) {
		t.Error("an event of a forgotten parent's child did not queue it")
	}
	if w.Expire("ns/p") {
		t.Error("a forgotten parent expired an echo")
	}
}

// Expiry waits for a running sync: its writes are not known yet.
func TestNothingExpiresWhileTheParentSyncs(t *testing.T) {
	now := time.Unix(1000, 0)
	w := New(time.Minute, true, false)
	w.now = func() time.Time { return now }
	w.Begin("ns/p")
	w.Finish("ns/p", created(1))
	w.Begin("ns/p")
	now = now.Add(2 * time.Minute)
	if w.Expire("ns/p") {
		t.Fatal("expired an echo while the parent's sync ran")
	}
	w.Finish("ns/p", &Writes{})
	if !w.Expire("ns/p") {
		t.Fatal("the lost echo was not given up once the sync ended")
	}
}
