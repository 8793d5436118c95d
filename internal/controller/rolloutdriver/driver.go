// Package rolloutdriver carries out a controller's progressive rollout
// (spec.rollout): it runs the loop of the revision the parents ran before
// beside the loop of the spec as written, feeds the rollout's step
// function (rollout.Step) what the loops observed, writes the status it
// decides, and only then moves the parents it says. Which loop syncs a
// parent is a pure function of the parent and the stored status
// (rollout.Plan), so that a restart, a failover or another replica
// resumes a rollout where it was with no record per parent. With --shards
// every replica runs both loops for the parents of its shards and reports
// how its syncs went (shards.go); one of them drives.
//
// The driver holds nothing of the manager that runs it: the loops, the
// controller's stored status and its Events come through the interfaces
// below, so that its model test (model_test.go) drives it through any
// sequence of ticks, restarts, edits and failures.
package rolloutdriver

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
	"github.com/composite-apiserver/composite-apiserver/internal/controller/parentloop"
	"github.com/composite-apiserver/composite-apiserver/internal/hooks"
	"github.com/composite-apiserver/composite-apiserver/internal/rollout"
)

// Tick is how often the driver looks at a step's parents.
const Tick = 2 * time.Second

// Loop is what the driver needs of one revision's loop (parentloop.Run).
type Loop interface {
	SetRevision(parentloop.Revision)
	// Parents are the parents the controller handles, from the
	// informers' caches; HasSynced whether those have listed.
	Parents() []*unstructured.Unstructured
	HasSynced() bool
	EnqueueWhere(in func(key string) bool)
	Start(ctx context.Context)
	Stop()
}

// Controller is what the driver needs of the controller it rolls out.
type Controller interface {
	// Stored is the rollout status as this replica's informer has it, nil
	// when the controller is gone or has none.
	Stored() *v1alpha1.RolloutStatus
	// Fresh is the rollout status as stored now, read from the API
	// rather than an informer that may lag.
	Fresh(ctx context.Context) (*v1alpha1.RolloutStatus, error)
	// WriteRollout writes status.rollout as change makes it of the stored
	// one; an error of change writes nothing and is returned.
	WriteRollout(ctx context.Context, change func(stored *v1alpha1.RolloutStatus) (*v1alpha1.RolloutStatus, error)) error
	// Event records an Event on the controller.
	Event(eventType, reason, message string)
	// Done says the rollout is complete: the manager stops the previous
	// revision's loop and the driver.
	Done()
	// Panicked says the driver panicked (err) and stopped: the manager
	// runs the controller anew from its stored status, with backoff.
	Panicked(err error)
}

// Config is a rollout to drive.
type Config struct {
	// Key names the controller, for logs and --shards.
	Key string
	// Spec and Status are spec.rollout as written and status.rollout as
	// stored; ResumedAt when a resume was last asked for.
	Spec      *v1alpha1.ControllerRollout
	Status    *v1alpha1.RolloutStatus
	ResumedAt time.Time
	// Update is the update revision's loop, Previous the current
	// revision's; PreviousRunning says Previous runs already (the
	// controller's loop until the rollout began).
	Update, Previous Loop
	PreviousRunning  bool
	Controller       Controller
	// Shards is this replica's group with --shards, nil without.
	Shards ShardGroup
	// Clock is the driver's clock; nil is the real one.
	Clock clock.PassiveClock
}

// Driver is a controller's rollout under way.
type Driver struct {
	cfg    Config
	clock  clock.PassiveClock
	plan   atomic.Pointer[rollout.Plan]
	began  time.Time
	cancel context.CancelFunc
	done   chan struct{}

	// mu guards what the loops' workers and the manager change while the
	// driver ticks; a tick holds it only to read or replace them, never
	// while it evaluates the health condition or writes.
	mu        sync.Mutex
	spec      v1alpha1.ControllerRollout
	health    *rollout.Health
	resumedAt time.Time
	status    v1alpha1.RolloutStatus
	// written is the status last written.
	written *v1alpha1.RolloutStatus
	// results are the update revision's last sync of each parent, since
	// the step (or its resume) began.
	results map[types.UID]syncResult
	// failures are the update revision's failed syncs in the step of
	// failuresOf.
	failures   int32
	failuresOf stepKey
	// finished says Finish took the plan over: no tick may plan again.
	finished bool

	// healthMemo is the health of each moved parent at the
	// resourceVersion it was evaluated at; the tick's goroutine only.
	healthMemo map[types.UID]healthMemo
	// lastHealthError is the health condition's error the driver last
	// recorded an Event of; the tick's goroutine only.
	lastHealthError string

	shards *shardsState
}

type syncResult struct {
	err        error
	generation int64
	// written is the resourceVersion the sync wrote the parent at.
	written string
	// epoch is the hold of the parent's shard the sync ran under, with
	// --shards (ShardGroup.Epoch).
	epoch uint64
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

// New makes the driver of the rollout of cfg; Start runs it.
func New(cfg Config) (*Driver, error) {
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	r := &Driver{cfg: cfg, clock: cfg.Clock, status: *cfg.Status.DeepCopy(), results: map[types.UID]syncResult{},
		healthMemo: map[types.UID]healthMemo{}, resumedAt: cfg.ResumedAt}
	r.began = r.clock.Now()
	r.status.Replicas = nil
	if cfg.Shards != nil {
		r.shards = &shardsState{group: cfg.Shards, driverKey: DriverKey(cfg.Key)}
	}
	if err := r.setSpec(cfg.Spec); err != nil {
		return nil, err
	}
	// Planned from the status as the step function reads it, not as an
	// earlier server may have stored it: a pause it wrote over a rollback
	// moves no parent back to the failed revision, not even until the
	// first decision is written.
	rollout.Upgrade(&r.status, &r.spec)
	if err := r.replan(); err != nil {
		return nil, err
	}
	cfg.Update.SetRevision(parentloop.Revision{Runs: r.updated, Synced: r.synced})
	cfg.Previous.SetRevision(parentloop.Revision{Runs: func(p metav1.Object) bool { return !r.updated(p) }})
	return r, nil
}

// Previous is the current revision's loop.
func (r *Driver) Previous() Loop { return r.cfg.Previous }

// setSpec takes the rollout's spec as written now; under mu or before
// Start.
func (r *Driver) setSpec(spec *v1alpha1.ControllerRollout) error {
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

// Follow takes a change of the controller that kept its revision: its
// rollout's spec (a pause, a resume, steps cut) or a resume asked for.
func (r *Driver) Follow(spec *v1alpha1.ControllerRollout, resumedAt time.Time) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.resumedAt = resumedAt
	return r.setSpec(spec)
}

// replan makes the plan of the status; under mu or before Start.
func (r *Driver) replan() error {
	if r.finished {
		return nil
	}
	plan, err := rollout.NewPlan(r.spec.Steps, &r.status)
	if err != nil {
		return err
	}
	r.plan.Store(plan)
	return nil
}

// updated tells whether the update revision syncs the parent.
func (r *Driver) updated(parent metav1.Object) bool {
	return r.plan.Load().Updated(parent)
}

// synced records how the update revision's sync of a parent ended. A
// hook's throttling (429 with Retry-After, which the loop retries when the
// hook asked) and a sync cut short by the loop's own stop are not the
// revision's failures (R9); a sync that left the status to the next one
// is not a result yet (R8).
func (r *Driver) synced(parent *unstructured.Unstructured, out parentloop.SyncOutcome) {
	var tooMany *hooks.TooManyRequestsError
	if out.Err != nil && (errors.As(out.Err, &tooMany) || errors.Is(out.Err, context.Canceled)) {
		return
	}
	if out.Err == nil && out.StatusDeferred {
		return
	}
	var epoch uint64
	if r.shards != nil {
		key, _ := cache.MetaNamespaceKeyFunc(parent)
		epoch = r.shards.group.Epoch(key)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.results[parent.GetUID()] = syncResult{err: out.Err, generation: parent.GetGeneration(), written: out.Written, epoch: epoch}
	if out.Err != nil && r.status.Phase == v1alpha1.RolloutProgressing {
		r.failuresNow()
		r.failures++
	}
}

// failuresNow are the update revision's failed syncs in the step under
// way; under mu.
func (r *Driver) failuresNow() int32 {
	if k := keyOf(&r.status); k != r.failuresOf {
		r.failures, r.failuresOf = 0, k
	}
	return r.failures
}

// Complete tells whether every parent runs the update revision now.
func (r *Driver) Complete() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.status.Phase == v1alpha1.RolloutComplete
}

// Start runs the previous loop and the driver until Stop.
func (r *Driver) Start(ctx context.Context) {
	ctx, r.cancel = context.WithCancel(ctx)
	r.done = make(chan struct{})
	if !r.cfg.PreviousRunning {
		r.cfg.Previous.Start(ctx)
	}
	go func() {
		defer close(r.done)
		wait.UntilWithContext(ctx, r.tick, Tick)
	}()
}

// Stop ends the driver and the previous revision's loop.
func (r *Driver) Stop() {
	r.stopTicking()
	r.cfg.Previous.Stop()
}

// stopTicking ends the tick and waits for the one under way, if Start ran.
func (r *Driver) stopTicking() {
	if r.cancel == nil {
		return
	}
	r.cancel()
	<-r.done
}

// Finish moves every parent to the update revision at once, and ends the
// driver and the previous revision's loop: spec.rollout was removed, or
// the rollout is complete. The tick ends first, so that none plans again
// after the plan of every parent is stored (R15).
func (r *Driver) Finish() {
	r.stopTicking()
	r.mu.Lock()
	before := r.plan.Load()
	r.plan.Store(&rollout.Plan{All: true})
	r.finished = true
	r.mu.Unlock()
	r.cfg.Previous.Stop()
	r.enqueueMoved(before)
}

// tick moves the rollout on, as far as its parents allow, and writes its
// status when that changed it. With --shards, a replica that does not
// drive follows the driver's status and reports its own parents instead.
// A panic is recovered: the controller is run anew from its stored status
// (Controller.Done), and the server goes on.
func (r *Driver) tick(ctx context.Context) {
	defer r.recoverPanic(ctx)
	if r.shards != nil {
		driveCtx, done, driving := r.shards.group.Begin(ctx, r.shards.driverKey)
		switch {
		case !driving:
			// Following: from the status as the driver wrote it.
			r.adopt()
		case !r.shards.driving:
			// Just now driving: from the status as stored, not as an
			// informer that may lag shows it.
			r.adoptFresh(ctx)
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
	r.step(ctx)
}

// recoverPanic turns a panic of the tick into an error in the log, a
// count, an Event and the controller run anew.
func (r *Driver) recoverPanic(ctx context.Context) {
	rec := recover()
	if rec == nil {
		return
	}
	err := &parentloop.PanicError{Recovered: rec, Stack: debug.Stack()}
	klog.FromContext(ctx).Error(err, "Recovered a panic in a rollout's driver; running the controller anew", "controller", r.cfg.Key, "stack", string(err.Stack))
	parentloop.CountPanic(r.cfg.Key)
	r.cfg.Controller.Event("Warning", "Panicked", "the rollout's driver panicked; the controller runs anew from its stored status: "+err.Error())
	// No tick after a panic: the state it left is not to be trusted.
	if r.cancel != nil {
		r.cancel()
	}
	r.cfg.Controller.Panicked(err)
}

// step is one decision of a driving replica: it writes the status the
// step function decided, and only once that is written records its Events
// and moves the parents (R17): a follower, a restart and a live /sync,
// which read the stored status, never see a move before it is stored.
func (r *Driver) step(ctx context.Context) {
	if !r.holdsStored() {
		// Another driver wrote since (this replica lost the drive and
		// took it again between two ticks), or the informer has not
		// seen this replica's own last write: decide on the status as
		// stored, read from the API.
		r.adoptFresh(ctx)
		return
	}
	in := r.input(ctx)
	if e := in.View.Tally.HealthError; e != "" && e != r.lastHealthError {
		r.cfg.Controller.Event("Warning", "RolloutHealthConditionFailed", fmt.Sprintf("the health condition failed on %d parents: %s", in.View.Tally.HealthErrors, e))
	}
	r.lastHealthError = in.View.Tally.HealthError
	d := rollout.Step(in)
	if r.written != nil && equality.Semantic.DeepEqual(r.written, &d.Status) && !d.Moved && !d.Resync {
		r.keep(&d.Status)
		return
	}
	status := d.Status.DeepCopy()
	gated := r.gatedOnReports(in, d)
	err := r.cfg.Controller.WriteRollout(ctx, func(stored *v1alpha1.RolloutStatus) (*v1alpha1.RolloutStatus, error) {
		if !sameDecisions(upgraded(stored, in.Spec), in.Status) || !gated(stored) {
			return nil, errMovedOn
		}
		return r.withReports(status, stored), nil
	})
	if errors.Is(err, errMovedOn) {
		r.adoptFresh(ctx)
		return
	}
	if err != nil {
		klog.FromContext(ctx).V(2).Info("Can't write the controller's rollout status", "controller", r.cfg.Key, "err", err)
		return
	}
	r.written = status
	before := r.carryOut(ctx, d)
	for _, e := range d.Events {
		r.cfg.Controller.Event(e.Type, e.Reason, e.Message)
	}
	if before != nil {
		r.enqueueMoved(before)
	}
	if d.Status.Phase == v1alpha1.RolloutComplete {
		r.cfg.Controller.Done()
	}
}

// errMovedOn says the stored rollout status is not the one a decision was
// made from: another driver wrote it since (this replica lost the drive
// and took it again between two ticks, or took it over from a lagging
// informer), or this replica's informer has not seen its own last write.
var errMovedOn = errors.New("the stored rollout status is not the one the decision was made from")

// sameDecisions tells whether two statuses hold the same decisions: all
// but what the replicas report and who drives.
func sameDecisions(a, b *v1alpha1.RolloutStatus) bool {
	if a == nil || b == nil {
		return a == b
	}
	a, b = a.DeepCopy(), b.DeepCopy()
	a.Replicas, b.Replicas, a.Driver, b.Driver = nil, nil, "", ""
	return equality.Semantic.DeepEqual(a, b)
}

// holdsStored tells whether the driver's status holds the decisions of
// the status its informer shows stored, as the step function reads it.
func (r *Driver) holdsStored() bool {
	stored := r.cfg.Controller.Stored()
	r.mu.Lock()
	defer r.mu.Unlock()
	return sameDecisions(upgraded(stored, &r.spec), &r.status)
}

// upgraded is a copy of the stored status st as the step function reads
// it (rollout.Upgrade), nil for none.
func upgraded(st *v1alpha1.RolloutStatus, spec *v1alpha1.ControllerRollout) *v1alpha1.RolloutStatus {
	if st == nil {
		return nil
	}
	st = st.DeepCopy()
	rollout.Upgrade(st, spec)
	return st
}

// adoptFresh takes the rollout's status as stored now, read from the API:
// a decision is never written over a status it was not made from, so
// that a driver that lost the drive, or took it over with an informer
// behind, does not undo what the other driver decided (a rollback, a
// step). The plan follows the status read, and the parents it moves are
// queued.
func (r *Driver) adoptFresh(ctx context.Context) {
	st, err := r.cfg.Controller.Fresh(ctx)
	if err != nil || st == nil {
		if err != nil {
			klog.FromContext(ctx).V(2).Info("Can't read the controller's rollout status", "controller", r.cfg.Key, "err", err)
		}
		return
	}
	r.adoptStatus(st)
}

// keep takes a decision that changed nothing to write (the status as
// written), as the driver's status.
func (r *Driver) keep(st *v1alpha1.RolloutStatus) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.status = *st.DeepCopy()
}

// carryOut makes the decision d, written, the driver's: its status, and
// its plan when it moved parents; it returns the plan before, whose moved
// parents are to be queued, nil when none moved.
func (r *Driver) carryOut(ctx context.Context, d rollout.Decision) *rollout.Plan {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.status = *d.Status.DeepCopy()
	if !d.Moved && !d.Resync {
		return nil
	}
	before := r.plan.Load()
	if d.Resync {
		// The moved parents are synced again, for the gate, which counts
		// the syncs since.
		r.results = map[types.UID]syncResult{}
		before = &rollout.Plan{None: true}
	}
	if err := r.replan(); err != nil {
		r.cfg.Controller.Event("Warning", "RolloutFailed", err.Error())
		klog.FromContext(ctx).Error(err, "Can't plan the controller's rollout", "controller", r.cfg.Key)
		return nil
	}
	return before
}

// input is what the step function decides on now: the rollout as written
// and as the driver holds it, and what the loops observed. The health
// condition is evaluated outside mu (R7).
func (r *Driver) input(ctx context.Context) rollout.Input {
	r.mu.Lock()
	in := rollout.Input{Spec: r.spec.DeepCopy(), Status: r.status.DeepCopy(), ResumedAt: r.resumedAt, Began: r.began}
	r.mu.Unlock()
	in.Now = r.clock.Now()
	in.View.Synced = r.cfg.Update.HasSynced() && r.cfg.Previous.HasSynced()
	st := in.Status
	if !in.View.Synced || st.Phase != v1alpha1.RolloutProgressing {
		return in
	}
	if st.StepStartTime == nil || int(st.Step) >= len(in.Spec.Steps) {
		in.View.Waiting = r.waiting()
		return in
	}
	in.View.Tally = r.tally(ctx)
	return in
}

// waiting are the parents the update revision does not sync yet.
func (r *Driver) waiting() []metav1.Object {
	var waiting []metav1.Object
	for _, p := range r.cfg.Update.Parents() {
		if !r.updated(p) {
			waiting = append(waiting, p)
		}
	}
	return waiting
}

// enqueueMoved queues the parents the plan moved from one revision to the
// other in the loop that syncs them now. A parent moved back forgets the
// update revision's result: the current revision syncs it next, and a
// step that moves it up again judges it by the update revision's next
// sync, not by the status the current revision wrote since.
func (r *Driver) enqueueMoved(before *rollout.Plan) {
	now := r.plan.Load()
	movedUp, movedBack := map[string]bool{}, map[string]bool{}
	var forget []types.UID
	for _, p := range r.cfg.Update.Parents() {
		was, is := before.Updated(p), now.Updated(p)
		if was == is {
			continue
		}
		key, _ := cache.MetaNamespaceKeyFunc(p)
		if is {
			movedUp[key] = true
		} else {
			movedBack[key] = true
			forget = append(forget, p.GetUID())
		}
	}
	if len(forget) > 0 {
		r.mu.Lock()
		for _, uid := range forget {
			delete(r.results, uid)
		}
		r.mu.Unlock()
	}
	if len(movedUp) > 0 {
		r.cfg.Update.EnqueueWhere(func(key string) bool { return movedUp[key] })
	}
	if len(movedBack) > 0 {
		r.cfg.Previous.EnqueueWhere(func(key string) bool { return movedBack[key] })
	}
}
