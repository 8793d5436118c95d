package controller

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
	"github.com/composite-apiserver/composite-apiserver/pkg/controller/parentloop"
	"github.com/composite-apiserver/composite-apiserver/pkg/definition"
	"github.com/composite-apiserver/composite-apiserver/pkg/rollout"
)

// A rollout runs two loops of one controller at once: the loop of the
// spec as written (the update revision, running.loop) and the loop of the
// revision its parents ran before (the current one, rolloutRun.previous,
// compiled from status.history with that revision's author and identity).
// Which loop syncs a parent is a pure function of the parent and the
// rollout's status (rollout.Plan), so that a restart, a failover or another
// replica resumes it where it was with no record per parent. The driver
// below moves the steps: it begins one, watches the update revision's
// syncs of the parents it moved, and passes it, pauses it or rolls it back.
// With --shards every replica runs both loops for the parents of its
// shards and reports how its syncs went (rolloutshards.go); one of them,
// the holder of the shard of the controller's key, drives.

// defaultDeadline is how long a step's parents have to pass its gate
// unless spec.rollout.health.deadlineSeconds says otherwise.
const defaultDeadline = 5 * time.Minute

// rolloutTick is how often the driver looks at a step's parents.
const rolloutTick = 2 * time.Second

// maxFailingNamed is how many failing parents the status names.
const maxFailingNamed = 20

// rolloutRun is a controller's rollout under way.
type rolloutRun struct {
	m     *Manager
	k     kind
	key   string
	store statusStore
	// previous is the current revision's loop; previousRunning when it is
	// the controller's loop until the rollout began, running already.
	previous        *parentloop.Run
	previousRunning bool
	// update is the update revision's loop, for its parents.
	update *parentloop.Run
	plan   atomic.Pointer[rollout.Plan]
	// began is when this driver began: a step's deadline counts from it
	// at the earliest, for the syncs of a restarted server.
	began  time.Time
	cancel context.CancelFunc
	done   chan struct{}

	mu     sync.Mutex
	owner  controllerObject
	spec   v1alpha1.ControllerRollout
	health *rollout.Health
	status v1alpha1.RolloutStatus
	// written is the status last written.
	written *v1alpha1.RolloutStatus
	// results are the update revision's last sync of each parent, since
	// the rollout (or its last resume) began.
	results map[types.UID]syncResult
	// failures are the update revision's failed syncs in the step of
	// failuresOf.
	failures   int32
	failuresOf stepKey

	// shards are the replica's part of its group with --shards; nil
	// without (this replica syncs every parent and drives).
	shards *rolloutShards
}

// stepKey names a step under way: a resumed step is another.
type stepKey struct {
	revision int64
	step     int32
	start    time.Time
}

func keyOf(st *v1alpha1.RolloutStatus) stepKey {
	k := stepKey{revision: st.UpdateRevision, step: st.Step}
	if st.StepStartTime != nil {
		k.start = st.StepStartTime.Time
	}
	return k
}

// failuresNow are the update revision's failed syncs in the step under
// way; under mu.
func (r *rolloutRun) failuresNow() int32 {
	if k := keyOf(&r.status); k != r.failuresOf {
		r.failures, r.failuresOf = 0, k
	}
	return r.failures
}

type syncResult struct {
	err        error
	generation int64
}

// newRolloutRun makes the driver of the rollout at status of the
// controller owner, whose update revision runs in update and current
// revision in previous; start runs it.
func newRolloutRun(m *Manager, k kind, key string, owner controllerObject, spec *v1alpha1.ControllerRollout, status *v1alpha1.RolloutStatus,
	update, previous *parentloop.Run) (*rolloutRun, error) {
	r := &rolloutRun{m: m, k: k, key: key, store: k.status(m), update: update, previous: previous, owner: owner,
		status: *status.DeepCopy(), results: map[types.UID]syncResult{}, began: time.Now()}
	r.status.Replicas = nil
	if m.group != nil {
		r.shards = &rolloutShards{group: m.group, driverKey: driverKey(key)}
	}
	if err := r.setSpec(spec); err != nil {
		return nil, err
	}
	if err := r.replan(); err != nil {
		return nil, err
	}
	update.SetRevision(parentloop.Revision{Runs: r.updated, Synced: r.synced})
	previous.SetRevision(parentloop.Revision{Runs: func(p metav1.Object) bool { return !r.updated(p) }})
	return r, nil
}

// setSpec takes the rollout's spec as written now.
func (r *rolloutRun) setSpec(spec *v1alpha1.ControllerRollout) error {
	var health *rollout.Health
	if h := spec.Health; h != nil && h.Condition != nil {
		var err error
		if health, err = rollout.CompileHealth(*h.Condition); err != nil {
			return fmt.Errorf("spec.rollout.health.condition: %w", err)
		}
	}
	r.spec, r.health = *spec.DeepCopy(), health
	return nil
}

// follow takes a change of the controller that kept its revision: its
// rollout's spec (a pause, a resume) or a resume requested.
func (r *rolloutRun) follow(owner controllerObject, spec *v1alpha1.ControllerRollout) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.owner = owner
	return r.setSpec(spec)
}

// replan makes the plan of the status; under mu or before start.
func (r *rolloutRun) replan() error {
	plan, err := rollout.NewPlan(r.spec.Steps, &r.status)
	if err != nil {
		return err
	}
	r.plan.Store(plan)
	return nil
}

// updated tells whether the update revision syncs the parent.
func (r *rolloutRun) updated(parent metav1.Object) bool {
	return r.plan.Load().Updated(parent)
}

// synced records how the update revision's sync of a parent ended.
func (r *rolloutRun) synced(parent *unstructured.Unstructured, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.results[parent.GetUID()] = syncResult{err: err, generation: parent.GetGeneration()}
	if err != nil && r.status.Phase == v1alpha1.RolloutProgressing {
		r.failuresNow()
		r.failures++
	}
}

// complete tells whether every parent runs the update revision now.
func (r *rolloutRun) complete() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.status.Phase == v1alpha1.RolloutComplete
}

// start runs the previous loop and the driver until stop.
func (r *rolloutRun) start(ctx context.Context) {
	ctx, r.cancel = context.WithCancel(ctx)
	r.done = make(chan struct{})
	if !r.previousRunning {
		r.previous.Start(ctx)
	}
	go func() {
		defer close(r.done)
		wait.UntilWithContext(ctx, r.tick, rolloutTick)
	}()
}

// stop ends the driver and the previous revision's loop.
func (r *rolloutRun) stop() {
	r.cancel()
	<-r.done
	r.previous.Stop()
}

// tick moves the rollout on, as far as its parents allow, and writes its
// status when that changed it. With --shards, a replica that does not
// drive follows the driver's status and reports its own parents instead.
func (r *rolloutRun) tick(ctx context.Context) {
	if r.shards != nil {
		driveCtx, done, driving := r.shards.group.Begin(ctx, r.shards.driverKey)
		if !driving || !r.shards.driving {
			// Following, or just now driving: from the status as the
			// driver before wrote it.
			r.adopt()
		}
		r.shards.driving = driving
		if !driving {
			r.report(ctx)
			return
		}
		defer done()
		ctx = driveCtx
		// After its status: the driver's own parents, for all to see.
		defer r.report(ctx)
	}
	r.mu.Lock()
	moved, events := r.advance(ctx)
	status, owner := r.status.DeepCopy(), r.owner
	r.mu.Unlock()
	// The Events after the status they announce is written (or could not
	// be): whoever sees "paused at step 2" can read the pause in the
	// status, not the step before it.
	defer func() {
		for _, e := range events {
			r.m.event(owner, e.eventType, e.reason, e.message)
		}
	}()
	if moved != nil {
		r.enqueueMoved(moved)
	}
	if r.written != nil && equality.Semantic.DeepEqual(r.written, status) {
		return
	}
	err := r.store.mutate(ctx, owner.GetName(), owner.GetUID(), func(t *trackedStatus) { t.Rollout = r.withReports(status, t.Rollout) })
	if err != nil {
		klog.FromContext(ctx).V(2).Info("Can't write the controller's rollout status", "err", err)
		return
	}
	r.written = status
	if status.Phase == v1alpha1.RolloutComplete {
		// The manager stops the previous revision's loop and this driver.
		r.m.queue.Add(r.key)
	}
}

type event struct{ eventType, reason, message string }

// advance is one look at the rollout; under mu. It returns the plan before
// it, when it moved parents from one revision to the other, and the Events
// to record.
func (r *rolloutRun) advance(ctx context.Context) (*rollout.Plan, []event) {
	st := &r.status
	if st.Phase == v1alpha1.RolloutComplete {
		return nil, nil
	}
	if e, stop := r.pauseOrResume(); stop {
		return nil, e
	} else if len(e) > 0 {
		// Resumed: the moved parents are synced again, for the gate,
		// which counts the syncs since.
		_, e = r.replanned(e)
		return &rollout.Plan{None: true}, e
	}
	if st.Phase != v1alpha1.RolloutProgressing || (st.NextStepTime != nil && time.Now().Before(st.NextStepTime.Time)) {
		return nil, nil
	}
	if st.StepStartTime == nil {
		return r.replanned(r.beginStep())
	}
	return r.gate(ctx)
}

// replanned makes the plan of the status the events changed, and returns
// the plan it replaces, for enqueueMoved.
func (r *rolloutRun) replanned(events []event) (*rollout.Plan, []event) {
	before := r.plan.Load()
	if err := r.replan(); err != nil {
		return nil, append(events, event{corev1.EventTypeWarning, "RolloutFailed", err.Error()})
	}
	return before, events
}

// pauseOrResume follows spec.rollout.paused and a resume requested after a
// failed step; stop says the rollout is paused.
func (r *rolloutRun) pauseOrResume() ([]event, bool) {
	st := &r.status
	userPaused := st.Phase == v1alpha1.RolloutPaused && st.Reason == "PausedByUser"
	switch {
	case r.spec.Paused && userPaused:
		return nil, true
	case r.spec.Paused:
		st.Phase, st.Reason, st.Message = v1alpha1.RolloutPaused, "PausedByUser", "spec.rollout.paused is true"
		return []event{{corev1.EventTypeNormal, "RolloutPaused", fmt.Sprintf("Rollout of revision %d paused at step %d of %d", st.UpdateRevision, st.Step+1, st.Steps)}}, true
	case userPaused:
		return r.resume("resumed: spec.rollout.paused is false"), false
	case st.Phase == v1alpha1.RolloutPaused || st.Phase == v1alpha1.RolloutRolledBack:
		if at, err := time.Parse(time.RFC3339, r.owner.GetAnnotations()[v1alpha1.RolloutResumedAnnotation]); err == nil && st.PausedTime != nil && at.After(st.PausedTime.Time) {
			if st.Phase == v1alpha1.RolloutRolledBack {
				st.Step = 0
			}
			return r.resume("resumed by kubectl composite rollout resume"), false
		}
		return nil, true
	}
	return nil, false
}

// resume goes on with the step under way, with a new deadline and error
// budget; a rolled-back rollout begins again at its first step.
func (r *rolloutRun) resume(message string) []event {
	st := &r.status
	restart := st.Phase == v1alpha1.RolloutRolledBack
	st.Phase, st.Reason, st.Message = v1alpha1.RolloutProgressing, "Resumed", message
	st.PausedTime, st.FailingParents, st.SyncFailures = nil, nil, 0
	r.results = map[types.UID]syncResult{}
	now := stamp(time.Now())
	st.StepStartTime = &now
	if restart {
		st.StepStartTime, st.BucketLimit = nil, 0
	}
	return []event{{corev1.EventTypeNormal, "RolloutResumed", fmt.Sprintf("Rollout of revision %d resumed at step %d of %d", st.UpdateRevision, st.Step+1, st.Steps)}}
}

// beginStep begins the step st.Step: it moves its parents.
func (r *rolloutRun) beginStep() []event {
	st := &r.status
	step := r.spec.Steps[st.Step]
	var waiting []metav1.Object
	for _, p := range r.update.Parents() {
		if !r.updated(p) {
			waiting = append(waiting, p)
		}
	}
	st.BucketLimit = rollout.LimitOf(step, st.BucketLimit, waiting)
	now := stamp(time.Now())
	st.StepStartTime, st.NextStepTime, st.SyncFailures, st.FailingParents = &now, nil, 0, nil
	st.Reason, st.Message = "StepBegun", fmt.Sprintf("step %d of %d began", st.Step+1, st.Steps)
	return []event{{corev1.EventTypeNormal, "RolloutStepBegun", fmt.Sprintf("Rollout of revision %d: step %d of %d began", st.UpdateRevision, st.Step+1, st.Steps)}}
}

// gate checks the step's parents: every parent moved so far must have been
// synced by the update revision and be healthy; a step that does not pass
// within its deadline, or spends its error budget, fails.
func (r *rolloutRun) gate(ctx context.Context) (*rollout.Plan, []event) {
	st := &r.status
	t := r.tally(ctx)
	st.UpdatedParents, st.HealthyParents, st.SyncFailures = t.Updated, t.Healthy, t.SyncFailures
	failing, moved := t.Failing, t.Updated
	if budget := r.spec.ErrorBudget; budget != nil && budget.MaxSyncFailures != nil && st.SyncFailures > *budget.MaxSyncFailures {
		return r.fail("ErrorBudgetExceeded", fmt.Sprintf("%d syncs of revision %d failed in step %d, more than the budget of %d",
			st.SyncFailures, st.UpdateRevision, st.Step+1, *budget.MaxSyncFailures), failing)
	}
	if len(failing) == 0 && len(t.Unreported) == 0 {
		return r.pass()
	}
	deadline := defaultDeadline
	if h := r.spec.Health; h != nil && h.DeadlineSeconds != nil {
		deadline = time.Duration(*h.DeadlineSeconds) * time.Second
	}
	if since := laterOf(st.StepStartTime.Time, r.began); time.Since(since) > deadline {
		if len(failing) == 0 {
			return r.fail("HealthCheckFailed", fmt.Sprintf("step %d was not reported on within %s: %s", st.Step+1, deadline, t.Waiting()), nil)
		}
		return r.fail("HealthCheckFailed", fmt.Sprintf("%d of %d parents of step %d were not synced by revision %d and healthy within %s",
			len(failing), moved, st.Step+1, st.UpdateRevision, deadline), failing)
	}
	st.Reason, st.Message = "WaitingForHealthy", fmt.Sprintf("step %d of %d: %d of %d parents healthy", st.Step+1, st.Steps, t.Healthy, moved)
	if len(t.Unreported) > 0 {
		st.Message += "; " + t.Waiting()
	}
	return nil, nil
}

// look is the gate's view of the parents this replica syncs: those the
// step moved, those of them healthy, and the others' names; under mu.
func (r *rolloutRun) look(ctx context.Context) rollout.Tally {
	t := rollout.Tally{SyncFailures: r.failuresNow()}
	for _, p := range r.update.Parents() {
		if !r.updated(p) {
			continue
		}
		key, _ := cache.MetaNamespaceKeyFunc(p)
		if r.shards != nil && !r.shards.group.Owns(key) {
			continue
		}
		t.Updated++
		if r.healthy(ctx, p) {
			t.Healthy++
		} else {
			t.Failing = append(t.Failing, key)
		}
	}
	slices.Sort(t.Failing)
	return t
}

// healthy tells whether a parent moved passes the gate: the update
// revision synced its current generation without an error, and it passes
// the health condition (by default, a Ready condition when it has one).
func (r *rolloutRun) healthy(ctx context.Context, p *unstructured.Unstructured) bool {
	res, ok := r.results[p.GetUID()]
	if !ok || res.err != nil || res.generation != p.GetGeneration() {
		return false
	}
	if r.health != nil {
		ok, err := r.health.Healthy(ctx, p)
		return ok && err == nil
	}
	ready, _ := rollout.DefaultHealthy(p)
	return ready
}

// pass ends the step: the next one begins (after its pause), or the
// rollout is complete.
func (r *rolloutRun) pass() (*rollout.Plan, []event) {
	st := &r.status
	events := []event{{corev1.EventTypeNormal, "RolloutStepPassed", fmt.Sprintf("Rollout of revision %d: step %d of %d passed, %d parents healthy", st.UpdateRevision, st.Step+1, st.Steps, st.HealthyParents)}}
	if pause := r.spec.Steps[st.Step].PauseSeconds; pause != nil {
		next := stamp(time.Now().Add(time.Duration(*pause) * time.Second))
		st.NextStepTime = &next
	}
	st.Step++
	st.StepStartTime, st.FailingParents = nil, nil
	if int(st.Step) < len(r.spec.Steps) {
		st.Reason, st.Message = "StepPassed", fmt.Sprintf("step %d of %d passed", st.Step, st.Steps)
		return nil, events
	}
	st.Phase, st.Reason, st.Message = v1alpha1.RolloutComplete, "RolloutComplete", fmt.Sprintf("every parent runs revision %d", st.UpdateRevision)
	st.CurrentRevision = st.UpdateRevision
	events = append(events, event{corev1.EventTypeNormal, "RolloutComplete", fmt.Sprintf("Rollout of revision %d complete", st.UpdateRevision)})
	return r.replanned(events)
}

// fail ends the step as spec.rollout.onFailure says.
func (r *rolloutRun) fail(reason, message string, failing []string) (*rollout.Plan, []event) {
	st := &r.status
	now := stamp(time.Now())
	st.PausedTime, st.Reason, st.Message = &now, reason, message
	st.FailingParents = failing[:min(len(failing), maxFailingNamed)]
	if p := r.spec.OnFailure; p != nil && *p == v1alpha1.RolloutRollback {
		st.Phase = v1alpha1.RolloutRolledBack
		return r.replanned([]event{{corev1.EventTypeWarning, "RolloutRolledBack", fmt.Sprintf("Rollout of revision %d rolled back to revision %d: %s", st.UpdateRevision, st.CurrentRevision, message)}})
	}
	st.Phase = v1alpha1.RolloutPaused
	return nil, []event{{corev1.EventTypeWarning, "RolloutPaused", fmt.Sprintf("Rollout of revision %d paused at step %d of %d: %s", st.UpdateRevision, st.Step+1, st.Steps, message)}}
}

// enqueueMoved queues the parents the plan moved from one revision to the
// other in the loop that syncs them now.
func (r *rolloutRun) enqueueMoved(before *rollout.Plan) {
	now := r.plan.Load()
	movedUp, movedBack := map[string]bool{}, map[string]bool{}
	for _, p := range r.update.Parents() {
		was, is := before.Updated(p), now.Updated(p)
		if was == is {
			continue
		}
		key, _ := cache.MetaNamespaceKeyFunc(p)
		if is {
			movedUp[key] = true
		} else {
			movedBack[key] = true
		}
	}
	r.update.EnqueueWhere(func(key string) bool { return movedUp[key] })
	r.previous.EnqueueWhere(func(key string) bool { return movedBack[key] })
}

// stamp is t as the status stores it, to the second: the driver's own
// status is then the one every replica reads, and its report of a step
// names the step as theirs do.
func stamp(t time.Time) metav1.Time { return metav1.NewTime(t.Truncate(time.Second)) }

func laterOf(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// finish moves every parent to the update revision at once, and ends the
// driver and the previous revision's loop: spec.rollout was removed, or the
// rollout is complete.
func (r *rolloutRun) finish() {
	before := r.plan.Load()
	r.plan.Store(&rollout.Plan{All: true})
	r.stop()
	r.enqueueMoved(before)
}

// previousStatus is the status the previous revision's loop reports to:
// its syncs count in the controller's status, which the update
// revision's loop writes.
type previousStatus struct{ *statusTracker }

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
		return nil, store.mutate(ctx, obj.GetName(), obj.GetUID(), func(t *trackedStatus) { t.Rollout = nil })
	}
	st := revs.status
	if st != nil && st.UpdateRevision == revs.revision {
		return st, nil
	}
	current := previous
	switch {
	case st != nil && st.Phase == v1alpha1.RolloutComplete:
		current = st.UpdateRevision
	case st != nil:
		// A new revision mid-way: the parents not moved still run the
		// current one; those moved go back to it until their step.
		current = st.CurrentRevision
	}
	steps := int32(len(revs.rollout.Steps))
	next := &v1alpha1.RolloutStatus{CurrentRevision: current, UpdateRevision: revs.revision, Steps: steps, Phase: v1alpha1.RolloutProgressing,
		Reason: "RolloutBegun", Message: fmt.Sprintf("rolling out revision %d over revision %d", revs.revision, current)}
	if _, ok := revs.at(current); !ok || current == revs.revision {
		// No earlier revision runs (a new controller, a server that was
		// down at the change, kubectl composite rollout undo mid-way):
		// nothing to roll.
		next = landed(revs, "NothingToRoll", fmt.Sprintf("every parent runs revision %d", revs.revision))
	} else {
		m.event(obj, corev1.EventTypeNormal, "RolloutBegun", next.Message)
	}
	return next, store.mutate(ctx, obj.GetName(), obj.GetUID(), func(t *trackedStatus) { t.Rollout = next })
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
	revs := k.revisions(r.owner)
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
		r.rollout, err = newRolloutRun(m, k, key, r.owner, revs.rollout, st, r.loop, current.loop)
		if err == nil {
			r.rollout.previousRunning = true
		}
		return err
	}
	def, err := k.compile(at, definition.RESTMapperResolver(m.cfg.Discovery))
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
	if r.rollout, err = newRolloutRun(m, k, key, r.owner, revs.rollout, st, r.loop, previousLoop); err != nil {
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
		equality.Semantic.DeepEqual(current.def.Author, k.author(at)) &&
		!current.def.Stale(definition.RESTMapperResolver(m.cfg.Discovery.Known()))
}

// followRollout takes a change of the controller r runs that kept its
// revision: a rollout paused or resumed, changed or removed.
func (m *Manager) followRollout(ctx context.Context, k kind, r *running, obj controllerObject) error {
	r.owner = obj
	r.tracker.setOwner(obj)
	if r.rollout == nil {
		return nil
	}
	revs := k.revisions(obj)
	if revs.rollout == nil || r.rollout.complete() {
		r.rollout.finish()
		r.rollout = nil
		if revs.rollout == nil {
			return k.status(m).mutate(ctx, obj.GetName(), obj.GetUID(), func(t *trackedStatus) { t.Rollout = nil })
		}
		return nil
	}
	return r.rollout.follow(obj, revs.rollout)
}
