// Package expectations is the loop's expectations: per parent, the watch
// events ("echoes") a sync's own writes will cause, told from every other
// change so that the loop syncs a parent once after its own writes rather
// than once per echo (kube-controller-manager's ControllerExpectations,
// matched per object by resourceVersion rather than counted).
package expectations

import (
	"sync"
	"time"
)

// Expectations tell the watch events that echo a sync's own writes from
// every other change, per parent, the way kube-controller-manager's
// ControllerExpectations tell a ReplicaSet's own pod creations from the
// rest. A sync that creates ten children and writes the parent's status
// comes back as eleven watch events; queued as they come, they made the
// hook be called two or three times more about a parent that nothing but
// the loop had changed (issue 23 item 8: 2.4–3.0 calls per parent).
//
// With it:
//   - the echoes of a sync's child writes queue the parent once, when the
//     last of them has arrived: the hook then sees every child it asked
//     for, as stored (a hook whose status reports its children needs that
//     call, and only that one);
//   - the echo of the parent's own status or decoration write (the hook's
//     answer, as stored) queues the parent once, as Metacontroller does,
//     so that a hook that reads its own status sees it stored and takes its
//     next step (spec.ownStatusWrites: Sync); with Ignore it queues
//     nothing. A sync's child and answer echoes together queue it once,
//     when the last has arrived. The echo of the loop's finalizer write
//     queues nothing: the sync went on with the parent it stored;
//   - anything else (a change by someone else, a write the loop did not
//     make, a parent or child deleted) queues the parent as before.
//
// Events that arrive while the parent's sync runs are held until it ends,
// when its writes are known; an expected echo that never arrives (a write
// the API server stored without a change, a watch that relisted past it)
// is given up after ttl, and the parent synced then to be safe. A write the
// API server stored nothing of is no write (apply.ParentStatus): it has no
// echo to wait for.
type Expectations struct {
	ttl time.Duration
	now func() time.Time
	// syncOnChildEchoes: the echoes of a sync's child writes sync the
	// parent once they have all arrived; without it (spec.ownChildWrites:
	// Ignore) they sync nothing.
	syncOnChildEchoes bool
	// syncOnStatusEchoes: the echo of a sync's write of the hook's answer
	// to the parent (its status, a decorator's labels and annotations)
	// syncs the parent once; without it (spec.ownStatusWrites: Ignore) it
	// syncs nothing.
	syncOnStatusEchoes bool

	mu      sync.Mutex
	parents map[string]*expected
	// deferred are the parents whose last sync left the status to the
	// next (reconcile.Options.StatusAfterChildEchoes).
	deferred map[string]bool
	// finishing are the parents queued because the echoes of their last
	// sync's child writes have all arrived; the queue serves them first.
	finishing map[string]bool
}

// Child names a child across its creation, updates and deletion.
type Child struct{ Group, Kind, Namespace, Name string }

// expected is what one parent waits for.
type expected struct {
	syncing bool
	// children are the child writes whose echo has not arrived: the
	// resourceVersion stored, or "" for a deletion.
	children map[Child]pending
	// parent are the parent's own writes whose echo has not arrived, by
	// the resourceVersion they stored.
	parent map[string]parentPending
	// seen are the events that arrived while the sync ran.
	seen []sighting
	// echoed: an echo the hook is to see (of a child write, or of its
	// answer written to the parent, as the policies say) arrived after the
	// last sync read the parent and its children.
	echoed bool
}

type parentPending struct {
	deadline time.Time
	// answer: the write stored the hook's answer, not the finalizer.
	answer bool
}

type pending struct {
	resourceVersion string
	deadline        time.Time
}

// sighting is an event that arrived during a sync: of a child when child
// is set, else of the parent.
type sighting struct {
	child           *Child
	resourceVersion string
	gone            bool
	// wanted: the event queues the parent if it is no echo (the parent's
	// own event may not, under ignoreStatusChanges).
	wanted bool
}

// New returns the expectations of one parent loop: an echo that has not
// arrived after ttl is given up. syncOnChildEchoes and syncOnStatusEchoes
// are spec.ownChildWrites and spec.ownStatusWrites: Sync.
func New(ttl time.Duration, syncOnChildEchoes, syncOnStatusEchoes bool) *Expectations {
	return &Expectations{
		ttl: ttl, now: time.Now, syncOnChildEchoes: syncOnChildEchoes, syncOnStatusEchoes: syncOnStatusEchoes,
		parents: map[string]*expected{}, deferred: map[string]bool{}, finishing: map[string]bool{},
	}
}

// Begin says the parent of key is being synced: the sync reads the
// children as they are now, so echoes that arrived so far are seen by
// it. It tells whether the last sync left the status to this one: then
// this one writes it, whatever it does to children (a hook that changes a
// child on every call must not keep its status from being written).
func (w *Expectations) Begin(key string) (deferredLast bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	deferredLast = w.deferred[key]
	delete(w.deferred, key)
	delete(w.finishing, key)
	e := w.parents[key]
	if e == nil {
		e = &expected{children: map[Child]pending{}, parent: map[string]parentPending{}}
		w.parents[key] = e
	}
	e.syncing, e.echoed, e.seen = true, false, nil
	return deferredLast
}

// ChildObserved is a watch event of a child of the parent of key, at
// resourceVersion; gone for a deletion, deleting for an object whose
// deletion has begun. It says whether to queue the parent.
func (w *Expectations) ChildObserved(key string, id Child, resourceVersion string, gone, deleting bool) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	e := w.parents[key]
	if e == nil {
		return true
	}
	if e.syncing {
		e.seen = append(e.seen, sighting{child: &id, resourceVersion: resourceVersion, gone: gone || deleting, wanted: true})
		return false
	}
	if !w.matchChild(e, id, resourceVersion, gone || deleting) {
		return true
	}
	return w.settle(key, e)
}

// ParentObserved is a watch event of the parent of key at resourceVersion;
// wanted says whether it queues the parent when it is no echo. It says
// whether to queue the parent.
func (w *Expectations) ParentObserved(key, resourceVersion string, wanted bool) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	e := w.parents[key]
	if e == nil {
		return wanted
	}
	if e.syncing {
		e.seen = append(e.seen, sighting{resourceVersion: resourceVersion, wanted: wanted})
		return false
	}
	if !w.matchParent(e, resourceVersion, wanted) {
		return wanted
	}
	return w.settle(key, e)
}

// Finish ends the sync of key, which stored writes (nil when it failed:
// its retry reads everything again). It says whether to queue the parent
// again: for an event that was no echo, or because the echoes of its
// writes that the hook is to see have all arrived. waiting says that some
// have not: the caller checks again after ttl (Expire).
func (w *Expectations) Finish(key string, writes *Writes) (enqueue, waiting bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	e := w.parents[key]
	if e == nil {
		return false, false
	}
	e.syncing = false
	if writes == nil {
		delete(w.parents, key)
		return false, false
	}
	if writes.StatusDeferred {
		w.deferred[key] = true
	}
	deadline := w.now().Add(w.ttl)
	for _, c := range writes.Children {
		e.children[c.Child] = pending{resourceVersion: c.ResourceVersion, deadline: deadline}
	}
	for _, pw := range writes.Parent {
		e.parent[pw.ResourceVersion] = parentPending{deadline: deadline, answer: pw.Answer}
	}
	// foreign: an event that is no echo arrived while the sync ran.
	foreign := false
	for _, s := range e.seen {
		switch {
		case s.child != nil && w.matchChild(e, *s.child, s.resourceVersion, s.gone):
		case s.child == nil && w.matchParent(e, s.resourceVersion, s.wanted):
		default:
			foreign = foreign || s.wanted
		}
	}
	e.seen = nil
	finishing := !w.awaiting(e) && e.echoed
	if finishing {
		e.echoed = false
	}
	if finishing && !foreign {
		w.finishing[key] = true
	}
	enqueue = foreign || finishing
	if len(e.children) == 0 && len(e.parent) == 0 {
		delete(w.parents, key)
		return enqueue, false
	}
	return enqueue, true
}

// Expire gives up the echoes of key past their deadline, and says whether
// the parent is to be synced: when some never arrived (the change the
// loop missed may be someone else's).
func (w *Expectations) Expire(key string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	e := w.parents[key]
	if e == nil || e.syncing {
		return false
	}
	now, lost := w.now(), false
	for id, p := range e.children {
		if !now.Before(p.deadline) {
			delete(e.children, id)
			lost = true
		}
	}
	for rv, p := range e.parent {
		if !now.Before(p.deadline) {
			delete(e.parent, rv)
			lost = true
		}
	}
	if !lost {
		return false
	}
	w.settle(key, e)
	return true
}

// Forget drops what the parent of key waits for: it is gone.
func (w *Expectations) Forget(key string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.parents, key)
	delete(w.deferred, key)
	delete(w.finishing, key)
}

// Finishing tells whether the parent of key is queued to finish its
// last sync: the echoes of its child writes have all arrived.
func (w *Expectations) Finishing(key string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.finishing[key]
}

// settle says, once an echo was matched, whether the parent is to be
// synced: when no echo it waits for is still to come and one the hook is
// to see came since its last sync read the parent. A parent that waits
// for nothing more is dropped.
func (w *Expectations) settle(key string, e *expected) bool {
	if w.awaiting(e) {
		return false
	}
	sync := e.echoed
	e.echoed = false
	if sync {
		w.finishing[key] = true
	}
	if len(e.children) == 0 && len(e.parent) == 0 {
		delete(w.parents, key)
	}
	return sync
}

// awaiting tells whether an echo the parent's next sync waits for is
// still to come: a child write's, or, when the echo of the hook's answer
// syncs the parent, that write's; so that one sync follows them all.
func (w *Expectations) awaiting(e *expected) bool {
	if len(e.children) > 0 {
		return true
	}
	if w.syncOnStatusEchoes {
		for _, p := range e.parent {
			if p.answer {
				return true
			}
		}
	}
	return false
}

// matchChild tells whether an event of a child is the echo of a write of
// the parent's, and takes it off what the parent waits for.
func (w *Expectations) matchChild(e *expected, id Child, resourceVersion string, gone bool) bool {
	p, ok := e.children[id]
	if !ok {
		return false
	}
	if p.resourceVersion == "" && !gone || p.resourceVersion != "" && (gone || p.resourceVersion != resourceVersion) {
		return false
	}
	delete(e.children, id)
	e.echoed = e.echoed || w.syncOnChildEchoes
	return true
}

// matchParent tells whether an event of the parent is the echo of one of
// its own writes, and takes it off what the parent waits for. The echo of
// the hook's answer is one the hook is to see unless the controller
// ignores that change (wanted false: ignoreStatusChanges).
func (w *Expectations) matchParent(e *expected, resourceVersion string, wanted bool) bool {
	p, ok := e.parent[resourceVersion]
	if !ok {
		return false
	}
	delete(e.parent, resourceVersion)
	e.echoed = e.echoed || p.answer && wanted && w.syncOnStatusEchoes
	return true
}

// Writes are what one sync stored: its children's writes and the
// parent's, each with the resourceVersion its echo carries.
type Writes struct {
	Children []ChildWrite
	Parent   []ParentWrite
	// StatusDeferred: the sync left the parent's status to the next.
	StatusDeferred bool
}

// ChildWrite is a write to a child: a create or update stored at
// ResourceVersion, or a deletion ("").
type ChildWrite struct {
	Child           Child
	ResourceVersion string
}

// ParentWrite is a write to the parent: of the hook's answer (its status,
// a decorator's labels and annotations) or of the finalizer.
type ParentWrite struct {
	ResourceVersion string
	Answer          bool
}

// Timeout is how long an expected echo is waited for (Expire).
func (w *Expectations) Timeout() time.Duration { return w.ttl }
