package controller

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
	"github.com/composite-apiserver/composite-apiserver/internal/controller/controllerstatus"
	"github.com/composite-apiserver/composite-apiserver/internal/controller/parentloop"
	"github.com/composite-apiserver/composite-apiserver/internal/controller/rolloutdriver"
	"github.com/composite-apiserver/composite-apiserver/internal/definition"
)

// A rollout runs two loops of one controller at once: the loop of the
// spec as written (the update revision, running.loop) and the loop of the
// revision its parents ran before (the current one, compiled from
// status.history with that revision's author and identity). The driver
// (internal/controller/rolloutdriver) moves the steps; this file starts it,
// follows the controller's changes into it and stops it.

// rolloutController is the controller as its rollout's driver sees it:
// its stored status, its Events, and the manager to tell when the
// rollout is done.
type rolloutController struct {
	m   *Manager
	k   kind
	key string
	// broken is set when the driver panicked: the manager runs the
	// controller anew.
	broken atomic.Bool

	mu    sync.Mutex
	owner controllerObject
}

var _ rolloutdriver.Controller = &rolloutController{}

func (c *rolloutController) setOwner(owner controllerObject) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.owner = owner
}

func (c *rolloutController) current() controllerObject {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.owner
}

// Stored is the controller's rollout status as this replica's informer
// has it, nil when the controller is gone or has none.
func (c *rolloutController) Stored() *v1alpha1.RolloutStatus {
	owner := c.current()
	obj, err := c.k.get(c.m, owner.GetName())
	if err != nil || obj.GetUID() != owner.GetUID() {
		return nil
	}
	return revisionsOf(obj).status
}

func (c *rolloutController) WriteRollout(ctx context.Context, change func(*v1alpha1.RolloutStatus) (*v1alpha1.RolloutStatus, error)) error {
	owner := c.current()
	return c.k.rollouts(c.m).mutate(ctx, owner.GetName(), owner.GetUID(), func(t *controllerstatus.Status) error {
		next, err := change(t.Rollout)
		t.Rollout = next
		return err
	})
}

func (c *rolloutController) Fresh(ctx context.Context) (*v1alpha1.RolloutStatus, error) {
	owner := c.current()
	return c.k.rollouts(c.m).rolloutStatus(ctx, owner.GetName(), owner.GetUID())
}

func (c *rolloutController) Event(eventType, reason, message string) {
	c.m.event(c.current(), eventType, reason, message)
}

func (c *rolloutController) Done() { c.m.queue.Add(c.key) }

func (c *rolloutController) Panicked(err error) {
	c.broken.Store(true)
	// With the manager's backoff (capped): a driver that panics again on
	// the same stored status is not restarted in a hot loop.
	c.m.queue.AddRateLimited(c.key)
}

// resumedAt is when kubectl composite rollout resume last asked to resume
// the controller's rollout, zero for never.
func resumedAt(obj controllerObject) time.Time {
	at, err := time.Parse(time.RFC3339, obj.GetAnnotations()[v1alpha1.RolloutResumedAnnotation])
	if err != nil {
		return time.Time{}
	}
	return at
}

// rolloutRun is a controller's rollout under way: its driver, the loop of
// the revision its parents not yet moved run, and that revision's
// definition, whose author is checked again as the update revision's is.
type rolloutRun struct {
	*rolloutdriver.Driver
	ctl *rolloutController
	// previous is the current revision's loop, previousDef its definition.
	previous    *parentloop.Run
	previousDef *definition.Definition
}

// rolloutStatusError is a failure to record a rollout's status: the
// controller's running loop goes on meanwhile (R21).
type rolloutStatusError struct{ err error }

func (e *rolloutStatusError) Error() string {
	return "can't record the rollout in the controller's status: " + e.err.Error()
}
func (e *rolloutStatusError) Unwrap() error { return e.err }

// newRolloutRun makes the driver of the rollout at status of the
// controller owner, whose update revision runs in update and current
// revision in previous.
func (m *Manager) newRolloutRun(k kind, key string, owner controllerObject, spec *v1alpha1.ControllerRollout, status *v1alpha1.RolloutStatus,
	update, previous *parentloop.Run, previousDef *definition.Definition, previousRunning bool) (*rolloutRun, error) {
	ctl := &rolloutController{m: m, k: k, key: key, owner: owner}
	cfg := rolloutdriver.Config{Key: key, Spec: spec, Status: status, ResumedAt: resumedAt(owner), Update: update, Previous: previous,
		PreviousRunning: previousRunning, Controller: ctl}
	if m.group != nil {
		cfg.Shards = m.group
	}
	d, err := rolloutdriver.New(cfg)
	if err != nil {
		return nil, err
	}
	return &rolloutRun{Driver: d, ctl: ctl, previous: previous, previousDef: previousDef}, nil
}

// previousStatus is the status the previous revision's loop reports to:
// its syncs count in the controller's status, which the update
// revision's loop writes.
type previousStatus struct{ *controllerstatus.Tracker }

func (previousStatus) Started(string)      {}
func (previousStatus) Run(context.Context) {}

// rolloutToRun is the rollout the controller obj runs now, nil for none: the
// one under way, or a new one of its update revision, begun from the
// revision its loop ran until now (previous, 0 when it ran none), which it
// records in the controller's status.
func (m *Manager) rolloutToRun(ctx context.Context, k kind, obj controllerObject, revs revisions, previous int64) (*v1alpha1.RolloutStatus, error) {
	store := k.status(m)
	if revs.rollout == nil {
		if revs.status == nil {
			return nil, nil
		}
		// Dropped mid-way: every parent runs the spec, as without one.
		return nil, store.Mutate(ctx, obj.GetName(), obj.GetUID(), func(t *controllerstatus.Status) { t.Rollout = nil })
	}
	st := revs.status
	if st != nil && st.UpdateRevision == revs.revision {
		return st, nil
	}
	current := beganFrom(revs, previous)
	steps := int32(len(revs.rollout.Steps))
	next := &v1alpha1.RolloutStatus{CurrentRevision: current, UpdateRevision: revs.revision, Steps: steps, Phase: v1alpha1.RolloutProgressing,
		Reason: "RolloutBegun", Message: fmt.Sprintf("rolling out revision %d over revision %d", revs.revision, current)}
	if _, ok := revs.at(current); !ok || current == revs.revision {
		// No earlier revision runs (a new controller, kubectl composite
		// rollout undo mid-way): nothing to roll.
		next = landed(revs, "NothingToRoll", fmt.Sprintf("every parent runs revision %d", revs.revision))
	}
	if err := store.Mutate(ctx, obj.GetName(), obj.GetUID(), func(t *controllerstatus.Status) { t.Rollout = next }); err != nil {
		return nil, &rolloutStatusError{err}
	}
	if next.Phase != v1alpha1.RolloutComplete {
		m.event(obj, corev1.EventTypeNormal, "RolloutBegun", next.Message)
	}
	return next, nil
}

// beganFrom is the revision the parents ran before the update revision
// revs.revision: the rollout under way's, or the running loop's
// (previous), or, when neither tells (a server that started after the
// change, a new leader, a first write of the rollout's status that
// failed), the newest revision of the history, which the spec replaced
// (R3): never "nothing ran before", which would land the change on every
// parent at once.
func beganFrom(revs revisions, previous int64) int64 {
	st := revs.status
	switch {
	case st != nil && st.Phase == v1alpha1.RolloutComplete:
		return st.UpdateRevision
	case st != nil:
		// A new revision mid-way: the parents not moved still run the
		// current one; those moved go back to it until their step.
		return st.CurrentRevision
	case previous != 0:
		return previous
	}
	return revs.newest
}

// landed is the status of a rollout with nothing to roll: every parent
// runs the spec's revision.
func landed(revs revisions, reason, message string) *v1alpha1.RolloutStatus {
	steps := int32(len(revs.rollout.Steps))
	return &v1alpha1.RolloutStatus{CurrentRevision: revs.revision, UpdateRevision: revs.revision, Steps: steps, Step: steps,
		Phase: v1alpha1.RolloutComplete, Reason: reason, Message: message}
}

// withRollout adds to r, just made, the rollout it runs, if any: the
// previous revision's loop and the driver. current is the controller's
// loop until now, nil for none: when it ran the previous revision as the
// rollout's previous revision runs it, the rollout takes it on as it is.
func (m *Manager) withRollout(ctx context.Context, k kind, key string, r *running, current *running) error {
	revs := revisionsOf(r.owner)
	var previous int64
	if current != nil {
		previous = current.revision
	}
	st, err := m.rolloutToRun(ctx, k, r.owner, revs, previous)
	if err != nil || st == nil || st.Phase == v1alpha1.RolloutComplete {
		return err
	}
	at, ok := revs.at(st.CurrentRevision)
	if !ok {
		return fmt.Errorf("revision %d, which the rollout's parents not yet moved run, is no longer in status.history", st.CurrentRevision)
	}
	if m.continues(k, current, at, st.CurrentRevision) {
		r.rollout, err = m.newRolloutRun(k, key, r.owner, revs.rollout, st, r.loop, current.loop, current.def, true)
		return err
	}
	def, err := definition.Compile(at, definition.RESTMapperResolver(m.cfg.Discovery))
	if err != nil {
		return fmt.Errorf("revision %d: %w", st.CurrentRevision, err)
	}
	if err := m.checkAuthor(ctx, def); err != nil {
		return fmt.Errorf("revision %d: %w", st.CurrentRevision, err)
	}
	previousLoop, err := parentloop.NewRun(ctx, &m.loops, key, at, def, previousStatus{r.tracker})
	if err != nil {
		return fmt.Errorf("revision %d: %w", st.CurrentRevision, err)
	}
	if r.rollout, err = m.newRolloutRun(k, key, r.owner, revs.rollout, st, r.loop, previousLoop, def, false); err != nil {
		previousLoop.Close()
		return err
	}
	return nil
}

// continues tells whether current, the controller's loop until now, runs
// revision at (numbered revision) exactly as a new loop of it would: then
// it goes on as the rollout's previous revision's loop, and the parents
// not moved are not synced again because a rollout began.
func (m *Manager) continues(k kind, current *running, at controllerObject, revision int64) bool {
	return current != nil && current.rollout == nil && current.revision == revision &&
		equality.Semantic.DeepEqual(current.def.Author, at.GetAuthor()) &&
		!current.def.Stale(definition.RESTMapperResolver(m.cfg.Discovery.Known()))
}

// followRollout takes a change of the controller r runs that kept its
// revision: a rollout paused or resumed, changed or removed.
func (m *Manager) followRollout(ctx context.Context, k kind, r *running, obj controllerObject) error {
	r.owner = obj
	r.tracker.SetOwner(obj)
	if r.rollout == nil {
		return nil
	}
	r.rollout.ctl.setOwner(obj)
	revs := revisionsOf(obj)
	if revs.rollout == nil || r.rollout.Complete() {
		r.rollout.Finish()
		r.rollout = nil
		if revs.rollout == nil {
			return k.status(m).Mutate(ctx, obj.GetName(), obj.GetUID(), func(t *controllerstatus.Status) { t.Rollout = nil })
		}
		return nil
	}
	return r.rollout.Follow(revs.rollout, resumedAt(obj))
}

// isRolloutStatusError tells whether err is only a failure to record a
// rollout's status.
func isRolloutStatusError(err error) bool {
	var e *rolloutStatusError
	return errors.As(err, &e)
}
