package controller

import (
	"context"
	"errors"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
	"github.com/composite-apiserver/composite-apiserver/pkg/engine"
	"github.com/composite-apiserver/composite-apiserver/pkg/hooks"
)

// statusTracker keeps a CompositeController's status in memory as its
// parents are synced, and writes it every interval, only when it changed:
// a busy controller writes its status a few times a minute, not once per
// parent sync.
type statusTracker struct {
	m  *Manager
	cc *v1alpha1.CompositeController

	mu            sync.Mutex
	ready         metav1.Condition
	hook          *metav1.Condition
	access        *metav1.Condition
	lastSync      time.Time
	lastSyncError string
	written       *v1alpha1.CompositeControllerStatus
}

func newStatusTracker(m *Manager, cc *v1alpha1.CompositeController) *statusTracker {
	return &statusTracker{m: m, cc: cc, ready: metav1.Condition{
		Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: "Starting", Message: "waiting for informers to sync",
	}}
}

func (s *statusTracker) setReady(ready bool, reason, message string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	status := metav1.ConditionFalse
	if ready {
		status = metav1.ConditionTrue
	}
	s.ready = metav1.Condition{Type: v1alpha1.ConditionReady, Status: status, Reason: reason, Message: message}
}

// hookCalled records whether the hooks answered; an invalid answer is a
// reachable hook with a wrong answer.
func (s *statusTracker) hookCalled(err error) {
	var call *hooks.CallError
	c := metav1.Condition{Type: v1alpha1.ConditionHookReachable, Status: metav1.ConditionTrue, Reason: "HookAnswered", Message: "the last hook call was answered"}
	if err != nil && errors.As(err, &call) {
		c = metav1.Condition{Type: v1alpha1.ConditionHookReachable, Status: metav1.ConditionFalse, Reason: "HookCallFailed", Message: truncate(err.Error(), 1024)}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hook = &c
}

// authorized records whether the last sync could read and write all it
// needed as the controller's subject: a refusal names the subject and the
// right.
func (s *statusTracker) authorized(err error) {
	c := metav1.Condition{Type: v1alpha1.ConditionAuthorized, Status: metav1.ConditionTrue, Reason: "Allowed", Message: "the last sync was allowed everything it did"}
	if err != nil {
		c = metav1.Condition{Type: v1alpha1.ConditionAuthorized, Status: metav1.ConditionFalse, Reason: "Forbidden", Message: truncate(err.Error(), 1024)}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.access = &c
}

func (s *statusTracker) synced(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lastSync = time.Now()
	s.lastSyncError = ""
	if err != nil {
		s.lastSyncError = truncate(err.Error(), 1024)
	}
}

// run writes the status every interval until ctx is done.
func (s *statusTracker) run(ctx context.Context, pc *parentController) {
	wait.UntilWithContext(ctx, func(ctx context.Context) { s.write(ctx, pc) }, s.m.cfg.StatusInterval)
}

func (s *statusTracker) desired(pc *parentController) v1alpha1.CompositeControllerStatus {
	parents, children, rolling := pc.counts()
	s.mu.Lock()
	defer s.mu.Unlock()
	status := v1alpha1.CompositeControllerStatus{
		ObservedGeneration: s.cc.Generation,
		Parents:            int32(parents),
		Children:           int32(children),
		RollingParents:     int32(rolling),
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
		c.ObservedGeneration = s.cc.Generation
		meta.SetStatusCondition(&status.Conditions, c)
	}
	if !s.lastSync.IsZero() {
		t := metav1.NewTime(s.lastSync.Truncate(time.Second))
		status.LastSyncTime = &t
	}
	return status
}

func (s *statusTracker) write(ctx context.Context, pc *parentController) {
	status := s.desired(pc)
	if s.written != nil && sameStatus(*s.written, status) {
		return
	}
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		current, err := s.m.ccLister.Get(s.cc.Name)
		if err != nil {
			return err
		}
		if current.UID != s.cc.UID {
			return nil
		}
		updated := current.DeepCopy()
		// Keep transition times of conditions that did not change.
		conditions := updated.Status.Conditions
		for _, c := range status.Conditions {
			meta.SetStatusCondition(&conditions, c)
		}
		updated.Status = status
		updated.Status.Conditions = conditions
		_, err = s.m.cfg.Client.MetacontrollerV1alpha1().CompositeControllers().UpdateStatus(ctx, updated, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		klog.FromContext(ctx).V(2).Info("Can't write the CompositeController's status", "err", err)
		return
	}
	s.written = &status
}

// sameStatus compares all but the last sync time, which is written only
// once it is a minute older than the one stored: it moves on every sync.
func sameStatus(a, b v1alpha1.CompositeControllerStatus) bool {
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

// counts returns how many parents the controller handles and how many
// children they own, from the informers' caches.
// counts are the parents, their children, and the parents mid-rollout:
// those whose Updated condition (written by a rolling update) is not True.
func (pc *parentController) counts() (parents, children, rolling int) {
	uids := map[string]bool{}
	for _, obj := range pc.parents.Informer().GetStore().List() {
		u := obj.(*unstructured.Unstructured)
		if pc.rec.Def.ParentLabels.Matches(labels.Set(u.GetLabels())) {
			uids[string(u.GetUID())] = true
			if c := engine.StatusCondition(u, engine.UpdatedCondition); c != nil && c["status"] != "True" {
				rolling++
			}
		}
	}
	for _, inf := range pc.children {
		for _, obj := range inf.Informer().GetStore().List() {
			if ref := metav1.GetControllerOfNoCopy(obj.(*unstructured.Unstructured)); ref != nil && uids[string(ref.UID)] {
				children++
			}
		}
	}
	return len(uids), children, rolling
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
