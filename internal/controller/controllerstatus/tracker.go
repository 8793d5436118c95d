// Package controllerstatus keeps a CompositeController's or
// DecoratorController's status as its loop runs: the Ready, HookReachable
// and Authorized conditions, the counts of parents and children, the last
// sync, written every interval and only when it changed. A rollout's part
// of the status (status.rollout) is its driver's, which the tracker keeps
// as stored.
package controllerstatus

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
	"github.com/composite-apiserver/composite-apiserver/internal/controller/parentloop"
	"github.com/composite-apiserver/composite-apiserver/internal/hooks"
)

// Status is the status of a controller of either kind, as the loop keeps
// it: each kind maps it to its own fields (v1alpha1.Controller's
// GetLoopStatus and SetLoopStatus). Its Rollout is written by the rollout's
// driver only; the tracker keeps it as stored.
type Status = v1alpha1.LoopStatus

// Store reads and writes the status of one kind of controller.
type Store interface {
	// Mutate applies change to the status of the controller named name,
	// read from the informer's cache, and writes it, unless the
	// controller is gone or is another one now (not uid); it retries on
	// a conflict.
	Mutate(ctx context.Context, name string, uid types.UID, change func(*Status)) error
}

// Owner is the controller whose status a Tracker keeps.
type Owner interface {
	GetName() string
	GetUID() types.UID
	GetGeneration() int64
}

// Tracker keeps a controller's status in memory as its parents are
// synced, and writes it every interval, only when it changed: a busy
// controller writes its status a few times a minute, not once per parent
// sync. A DecoratorController's parent loops (one per resource) share one.
type Tracker struct {
	owner    Owner
	store    Store
	interval time.Duration
	// counts are the controller's parents, children and parents
	// mid-rollout (parentloop.Run.Counts), set once its loop is made.
	Counts func() parentloop.Counts
	// clock times the counts and says when the next is due: time.Now, or
	// a test's, whose counts take as long as it says.
	clock func() time.Time
	// counted is the last count, written with every status until countDue,
	// when the next count is (Run's goroutine only).
	counted  parentloop.Counts
	countDue time.Time

	mu sync.Mutex
	// starting counts the parent loops whose informers have not synced.
	starting int
	ready    metav1.Condition
	hook     *metav1.Condition
	access   *metav1.Condition
	lastSync time.Time
	// failing are the parents whose last sync failed, with its error: the
	// status shows the latest of them until each has synced again
	// (lastSyncError).
	failing map[string]failure
	written *Status
	// panicking are the parents whose last sync panicked, with the
	// panic: the controller is not Ready while any is.
	panicking map[string]string
	// Event records an Event on the controller (Manager.event).
	Event func(eventType, reason, message string)
	// successor, once set, is the tracker of the controller's next
	// revision, whose rollout took this one's loop on as its previous
	// revision's: this one writes nothing more, and passes what its loop
	// reports on to it.
	successor *Tracker
}

// Retire makes successor the tracker this one's loop reports to.
func (s *Tracker) Retire(successor *Tracker) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.successor = successor
}

// next is the successor to report to, nil while this tracker is current.
func (s *Tracker) next() *Tracker {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.successor
}

var _ parentloop.Status = &Tracker{}

// New is the tracker of owner's status, written to store every
// interval, Ready once loops parent loops started.
func New(owner Owner, store Store, interval time.Duration, loops int) *Tracker {
	return &Tracker{owner: owner, store: store, interval: interval, clock: time.Now, starting: loops, ready: metav1.Condition{
		Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: "Starting", Message: "waiting for informers to sync",
	}}
}

// SetOwner takes the controller as written now, whose generation the
// status observes: a change of its rollout alone keeps its loop.
func (s *Tracker) SetOwner(owner Owner) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.owner = owner
}

// Started records that one parent loop's informers synced; the controller
// is Ready once all of them did.
func (s *Tracker) Started(message string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.starting--; s.starting <= 0 {
		s.ready = metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: "Running", Message: message}
	}
}

// HookCalled records whether the hooks answered; an invalid answer is a
// reachable hook with a wrong answer.
func (s *Tracker) HookCalled(err error) {
	if n := s.next(); n != nil {
		n.HookCalled(err)
		return
	}
	var call *hooks.CallError
	c := metav1.Condition{Type: v1alpha1.ConditionHookReachable, Status: metav1.ConditionTrue, Reason: "HookAnswered", Message: "the last hook call was answered"}
	if err != nil && errors.As(err, &call) {
		c = metav1.Condition{Type: v1alpha1.ConditionHookReachable, Status: metav1.ConditionFalse, Reason: "HookCallFailed", Message: Truncate(err.Error(), 1024)}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hook = &c
}

// Authorized records whether the last sync could read and write all it
// needed as the controller's subject: a refusal names the subject and the
// right.
func (s *Tracker) Authorized(err error) {
	if n := s.next(); n != nil {
		n.Authorized(err)
		return
	}
	c := metav1.Condition{Type: v1alpha1.ConditionAuthorized, Status: metav1.ConditionTrue, Reason: "Allowed", Message: "the last sync was allowed everything it did"}
	if err != nil {
		c = metav1.Condition{Type: v1alpha1.ConditionAuthorized, Status: metav1.ConditionFalse, Reason: "Forbidden", Message: Truncate(err.Error(), 1024)}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.access = &c
}

// Panicked records that the sync of the parent of key panicked (err) or,
// with nil, ended without: a panic makes the controller not Ready, with
// reason Panicked and an Event, until that parent syncs without one.
func (s *Tracker) Panicked(key string, err error) {
	if n := s.next(); n != nil {
		n.Panicked(key, err)
		return
	}
	s.mu.Lock()
	if err == nil {
		if _, ok := s.panicking[key]; ok {
			delete(s.panicking, key)
		}
		s.mu.Unlock()
		return
	}
	if s.panicking == nil {
		s.panicking = map[string]string{}
	}
	s.panicking[key] = err.Error()
	event := s.Event
	s.mu.Unlock()
	if event != nil {
		event(corev1.EventTypeWarning, "Panicked", fmt.Sprintf("the sync of %s panicked, retrying with backoff: %s", key, Truncate(err.Error(), 512)))
	}
}

// panicked is the Ready condition of a controller one of whose parents'
// syncs panicked last; under mu.
func (s *Tracker) panicked() (metav1.Condition, bool) {
	if len(s.panicking) == 0 {
		return metav1.Condition{}, false
	}
	keys := make([]string, 0, len(s.panicking))
	for k := range s.panicking {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: "Panicked",
		Message: Truncate(fmt.Sprintf("the last sync of %d parents panicked (first: %s): %s", len(keys), keys[0], s.panicking[keys[0]]), 1024)}, true
}

// failure is a parent's last sync's error, and when it ended.
type failure struct {
	message string
	at      time.Time
}

// Synced records how the last sync of the parent of key ended. The
// status's lastSyncError is the latest error among the parents whose last
// sync failed, empty once each has synced again: a healthy parent's
// success does not hide another's failure, as a controller-wide "last
// sync" would between two retries of the failing one.
func (s *Tracker) Synced(key string, err error) {
	if n := s.next(); n != nil {
		n.Synced(key, err)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lastSync = time.Now()
	if err == nil {
		delete(s.failing, key)
		return
	}
	if s.failing == nil {
		s.failing = map[string]failure{}
	}
	s.failing[key] = failure{message: Truncate(err.Error(), 1024), at: s.lastSync}
}

// lastSyncError is the latest error of the parents whose last sync
// failed, empty when none did; under mu.
func (s *Tracker) lastSyncError() string {
	var latest failure
	for _, f := range s.failing {
		if f.at.After(latest.at) {
			latest = f
		}
	}
	return latest.message
}

// countingShare is the most of one core that counting a controller's
// parents and children for its status may take: a count reads every parent
// in the caches and looks up its children (about 0.1 s among 10,000
// parents × 10 ConfigMaps on a busy 2-core machine, 7% of the server's CPU
// while they converged, counted every 5 s), so among many parents the
// counts are brought up to date less often than every interval.
const countingShare = 0.01

// Run writes the status every interval, when it changed, until ctx is
// done. Only the counts wait for their pace: the last sync's error and the
// conditions, which users read to see a failing hook, cost nothing to read
// and must not wait a minute for a slow count, so they are written within
// an interval, with the last counts.
func (s *Tracker) Run(ctx context.Context) {
	for {
		s.write(ctx)
		select {
		case <-ctx.Done():
			return
		case <-time.After(s.interval):
		}
	}
}

// pace is how long to wait before the next count: interval, or longer
// when counting took so long that counting every interval would take more
// than countingShare of a core.
func pace(interval, countTook time.Duration) time.Duration {
	return max(interval, time.Duration(float64(countTook)/countingShare))
}

// counts counts the controller's parents and children anew once the last
// count's pace is over, and is the last count until then.
func (s *Tracker) counts() parentloop.Counts {
	start := s.clock()
	if start.Before(s.countDue) {
		return s.counted
	}
	s.counted = s.Counts()
	// Due from the count's start, so that a cheap count is due again at
	// the next write, an interval later.
	s.countDue = start.Add(pace(s.interval, s.clock().Sub(start)))
	return s.counted
}

func (s *Tracker) desired() Status {
	n := s.counts()
	s.mu.Lock()
	defer s.mu.Unlock()
	generation := s.owner.GetGeneration()
	status := Status{
		ObservedGeneration: generation,
		Parents:            int32(n.Parents),
		Children:           int32(n.Children),
		RollingParents:     int32(n.Rolling),
		PausedParents:      int32(n.Paused),
		LastSyncError:      s.lastSyncError(),
	}
	ready := s.ready
	if c, ok := s.panicked(); ok {
		ready = c
	}
	conditions := []metav1.Condition{ready}
	if s.hook != nil {
		conditions = append(conditions, *s.hook)
	}
	if s.access != nil {
		conditions = append(conditions, *s.access)
	}
	for _, c := range conditions {
		c.ObservedGeneration = generation
		meta.SetStatusCondition(&status.Conditions, c)
	}
	if !s.lastSync.IsZero() {
		t := metav1.NewTime(s.lastSync.Truncate(time.Second))
		status.LastSyncTime = &t
	}
	return status
}

func (s *Tracker) write(ctx context.Context) {
	if s.next() != nil {
		return
	}
	status := s.desired()
	if s.written != nil && sameStatus(*s.written, status) {
		return
	}
	s.mu.Lock()
	owner := s.owner
	s.mu.Unlock()
	err := s.store.Mutate(ctx, owner.GetName(), owner.GetUID(), func(stored *Status) {
		// Keep transition times of conditions that did not change.
		conditions, rollout := stored.Conditions, stored.Rollout
		for _, c := range status.Conditions {
			meta.SetStatusCondition(&conditions, c)
		}
		*stored = status
		stored.Conditions, stored.Rollout = conditions, rollout
	})
	if err != nil {
		klog.FromContext(ctx).V(2).Info("Can't write the controller's status", "err", err)
		return
	}
	s.written = &status
}

// sameStatus compares all but the last sync time, which is written only
// once it is a minute older than the one stored: it moves on every sync.
func sameStatus(a, b Status) bool {
	at, bt := a.LastSyncTime, b.LastSyncTime
	a.LastSyncTime, b.LastSyncTime = nil, nil
	if !equality.Semantic.DeepEqual(a, b) {
		return false
	}
	if (at == nil) != (bt == nil) {
		return false
	}
	return at == nil || bt.Sub(at.Time) < time.Minute
}

// Truncate cuts s to n bytes, marking the cut.
func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
