package controller

import (
	"context"
	"errors"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
	"github.com/composite-apiserver/composite-apiserver/pkg/controller/parentloop"
	"github.com/composite-apiserver/composite-apiserver/pkg/hooks"
)

// statusTracker keeps a controller's status in memory as its parents are
// synced, and writes it every interval, only when it changed: a busy
// controller writes its status a few times a minute, not once per parent
// sync. A DecoratorController's parent loops (one per resource) share one.
type statusTracker struct {
	owner    controllerObject
	store    statusStore
	interval time.Duration
	// counts are the controller's parents, children and parents
	// mid-rollout (parentloop.Run.Counts), set once its loop is made.
	counts func() parentloop.Counts
	// countTook is how long the last count took (Run's goroutine only).
	countTook time.Duration

	mu sync.Mutex
	// starting counts the parent loops whose informers have not synced.
	starting      int
	ready         metav1.Condition
	hook          *metav1.Condition
	access        *metav1.Condition
	lastSync      time.Time
	lastSyncError string
	written       *trackedStatus
	// successor, once set, is the tracker of the controller's next
	// revision, whose rollout took this one's loop on as its previous
	// revision's: this one writes nothing more, and passes what its loop
	// reports on to it.
	successor *statusTracker
}

// retire makes successor the tracker this one's loop reports to.
func (s *statusTracker) retire(successor *statusTracker) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.successor = successor
}

// next is the successor to report to, nil while this tracker is current.
func (s *statusTracker) next() *statusTracker {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.successor
}

var _ parentloop.Status = &statusTracker{}

func newStatusTracker(owner controllerObject, store statusStore, interval time.Duration, loops int) *statusTracker {
	return &statusTracker{owner: owner, store: store, interval: interval, starting: loops, ready: metav1.Condition{
		Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: "Starting", Message: "waiting for informers to sync",
	}}
}

// setOwner takes the controller as written now, whose generation the
// status observes: a change of its rollout alone keeps its loop.
func (s *statusTracker) setOwner(owner controllerObject) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.owner = owner
}

// Started records that one parent loop's informers synced; the controller
// is Ready once all of them did.
func (s *statusTracker) Started(message string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.starting--; s.starting <= 0 {
		s.ready = metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: "Running", Message: message}
	}
}

// HookCalled records whether the hooks answered; an invalid answer is a
// reachable hook with a wrong answer.
func (s *statusTracker) HookCalled(err error) {
	if n := s.next(); n != nil {
		n.HookCalled(err)
		return
	}
	var call *hooks.CallError
	c := metav1.Condition{Type: v1alpha1.ConditionHookReachable, Status: metav1.ConditionTrue, Reason: "HookAnswered", Message: "the last hook call was answered"}
	if err != nil && errors.As(err, &call) {
		c = metav1.Condition{Type: v1alpha1.ConditionHookReachable, Status: metav1.ConditionFalse, Reason: "HookCallFailed", Message: truncate(err.Error(), 1024)}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hook = &c
}

// Authorized records whether the last sync could read and write all it
// needed as the controller's subject: a refusal names the subject and the
// right.
func (s *statusTracker) Authorized(err error) {
	if n := s.next(); n != nil {
		n.Authorized(err)
		return
	}
	c := metav1.Condition{Type: v1alpha1.ConditionAuthorized, Status: metav1.ConditionTrue, Reason: "Allowed", Message: "the last sync was allowed everything it did"}
	if err != nil {
		c = metav1.Condition{Type: v1alpha1.ConditionAuthorized, Status: metav1.ConditionFalse, Reason: "Forbidden", Message: truncate(err.Error(), 1024)}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.access = &c
}

// Synced records how the last sync ended.
func (s *statusTracker) Synced(err error) {
	if n := s.next(); n != nil {
		n.Synced(err)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lastSync = time.Now()
	s.lastSyncError = ""
	if err != nil {
		s.lastSyncError = truncate(err.Error(), 1024)
	}
}

// countingShare is the most of one core that counting a controller's
// parents and children for its status may take: a count reads every parent
// in the caches and looks up its children (about 0.1 s among 10,000
// parents × 10 ConfigMaps on a busy 2-core machine, 7% of the server's CPU
// while they converged, counted every 5 s), so among many parents the
// status is brought up to date less often than every interval.
const countingShare = 0.01

// Run writes the status every interval, or every took/countingShare when
// the last count took longer, until ctx is done.
func (s *statusTracker) Run(ctx context.Context) {
	for {
		s.write(ctx)
		select {
		case <-ctx.Done():
			return
		case <-time.After(pace(s.interval, s.countTook)):
		}
	}
}

// pace is how long to wait before the next write: interval, or longer
// when counting took so long that counting every interval would take more
// than countingShare of a core.
func pace(interval, countTook time.Duration) time.Duration {
	return max(interval, time.Duration(float64(countTook)/countingShare))
}

func (s *statusTracker) desired() trackedStatus {
	start := time.Now()
	n := s.counts()
	s.countTook = time.Since(start)
	s.mu.Lock()
	defer s.mu.Unlock()
	generation := s.owner.GetGeneration()
	status := trackedStatus{
		ObservedGeneration: generation,
		Parents:            int32(n.Parents),
		Children:           int32(n.Children),
		RollingParents:     int32(n.Rolling),
		PausedParents:      int32(n.Paused),
		LastSyncError:      s.lastSyncError,
	}
	conditions := []metav1.Condition{s.ready}
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

func (s *statusTracker) write(ctx context.Context) {
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
	err := s.store.mutate(ctx, owner.GetName(), owner.GetUID(), func(stored *trackedStatus) {
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
func sameStatus(a, b trackedStatus) bool {
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

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
