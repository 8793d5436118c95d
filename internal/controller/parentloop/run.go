package parentloop

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"github.com/composite-apiserver/composite-apiserver/internal/controller/eventbudget"
	"github.com/composite-apiserver/composite-apiserver/internal/controller/syncgate"
	"github.com/composite-apiserver/composite-apiserver/internal/definition"
)

// Run is one controller's loop: a parent loop per parent resource (one
// for a CompositeController, one per resource of a DecoratorController),
// sharing one status, one queue and one set of workers. One queue, as
// Metacontroller's decorator has: a key is synced by one worker at a time,
// so however a controller's resources are written, no object is synced
// twice at once, and --workers bounds the controller's concurrent hook
// calls whatever the number of its resources.
type Run struct {
	def *definition.Definition
	pcs []*parentLoop
	// views are the parent loops by the view their keys carry in queue.
	views   map[string]*parentLoop
	queue   workqueue.TypedRateLimitingInterface[string]
	workers int
	// stopGrace is how long the syncs in flight when the loop stops may
	// go on (Config.StopGrace).
	stopGrace time.Duration
	// cancel stops the workers; cancelSyncs ends the syncs' context, once
	// they have returned or the grace has passed.
	cancel, cancelSyncs context.CancelFunc
	done                sync.WaitGroup
}

// NewRun makes the loop of def, compiled from owner, the controller as
// written (Events about its loop are recorded on it), which key names in
// the manager's queue, metrics and logs; its parent loops report to
// status. Start runs it.
func NewRun(ctx context.Context, cfg *Config, key string, owner runtime.Object, def *definition.Definition, status Status) (*Run, error) {
	run := &Run{def: def, views: map[string]*parentLoop{}}
	// One budget for the controller, whichever resource its parents are.
	childEvents := eventbudget.New(cfg.ChildEventsQPS, cfg.ChildEventsBurst, key, func() {
		childEventsDropped(klog.FromContext(ctx), cfg, owner, def)
	})
	for _, view := range def.Parents() {
		pc, err := newParentLoop(ctx, cfg, key, owner, view, status)
		if err != nil {
			for _, built := range run.pcs {
				built.hooks.Close()
			}
			return nil, err
		}
		pc.childEvents = childEvents
		run.pcs = append(run.pcs, pc)
	}
	shards := routedShards(cfg.Shards, run.route)
	run.queue = newParentQueue(strings.ToLower(def.Kind)+"-"+def.Name, run.unsynced, run.finishing, shards)
	for _, pc := range run.pcs {
		if def.Kind == definition.KindDecorator {
			// definition.Compile refuses a group and resource listed
			// twice, so each view has keys of its own.
			pc.view = pc.rec.Def.Parent.GVR.GroupResource().String()
		}
		pc.queue, pc.shards = run.queue, shards
		run.views[pc.view] = pc
	}
	run.workers = run.pcs[0].workers
	run.stopGrace = cfg.StopGrace
	run.pcs[0].writesStatus = true
	return run, nil
}

// childEventsDropped says on the controller, and in the log, that its
// budget of Events about children is spent (eventbudget).
func childEventsDropped(logger klog.Logger, cfg *Config, owner runtime.Object, def *definition.Definition) {
	msg := fmt.Sprintf("Events about what syncs did to children are over this controller's budget (%g a second after a burst of %d: --child-events-qps, --child-events-burst); the others are not recorded, and counted in composite_controller_child_events_dropped_total. Warnings are always recorded.",
		cfg.ChildEventsQPS, cfg.ChildEventsBurst)
	logger.Info("Not recording every Event about children: over the controller's budget", strings.ToLower(def.Kind), def.Name, "qps", cfg.ChildEventsQPS, "burst", cfg.ChildEventsBurst)
	if cfg.Recorder != nil {
		cfg.Recorder.Event(owner, corev1.EventTypeNormal, "ChildEventsThrottled", msg)
	}
}

// Close gives back what NewRun made, for a loop never started.
func (r *Run) Close() {
	for _, pc := range r.pcs {
		pc.hooks.Close()
	}
}

// EnqueueWhere queues, in every parent loop, the parents whose key is in:
// those of shards this replica just gained.
func (r *Run) EnqueueWhere(in func(key string) bool) {
	for _, pc := range r.pcs {
		pc.enqueueWhere(in)
	}
}

// Counts are what a controller's status counts of its parents.
type Counts struct {
	// Parents and their Children; Rolling are the parents mid-rollout of
	// their children, Paused those annotated paused.
	Parents, Children, Rolling, Paused int
}

// Counts are the controller's parents, their children, the parents
// mid-rollout and the paused ones, from the informers' caches (for its
// status).
func (r *Run) Counts() Counts {
	var sum Counts
	for _, pc := range r.pcs {
		n := pc.counts()
		sum.Parents, sum.Children, sum.Rolling, sum.Paused = sum.Parents+n.Parents, sum.Children+n.Children, sum.Rolling+n.Rolling, sum.Paused+n.Paused
	}
	return sum
}

// queueKey is the key of the parent of key (namespace/name) of view in a
// controller's queue: key itself for a CompositeController (view ""), else
// "<resource>.<group>/<key>", so that objects of two resources of one
// DecoratorController, of one name, are two keys.
func queueKey(view, key string) string {
	if view == "" {
		return key
	}
	return view + "/" + key
}

// route is the parent loop and parent key of a key of the queue; nil when
// no loop has its view. A resource has no "/" in its name, so the first
// one ends the view.
func (r *Run) route(qkey string) (*parentLoop, string) {
	view, key := "", qkey
	if r.def.Kind == definition.KindDecorator {
		view, key, _ = strings.Cut(qkey, "/")
	}
	return r.views[view], key
}

// unsynced and finishing are the queue's lanes' questions (see lanes),
// asked of the parent's loop.
func (r *Run) unsynced(qkey string) bool {
	pc, key := r.route(qkey)
	return pc != nil && pc.unsynced(key)
}

func (r *Run) finishing(qkey string) bool {
	pc, key := r.route(qkey)
	return pc != nil && pc.expectations.Finishing(key)
}

// Start runs the parent loops and, once all of them have had their
// informers' initial lists, the controller's workers until stop.
func (r *Run) Start(parent context.Context) {
	ctx, cancel := context.WithCancel(parent)
	r.cancel = cancel
	ctx = klog.NewContext(ctx, klog.FromContext(ctx).WithValues(strings.ToLower(r.def.Kind), r.def.Name))
	syncs, cancelSyncs := lingering(ctx, r.stopGrace)
	r.cancelSyncs = cancelSyncs
	for _, pc := range r.pcs {
		pc.start(ctx)
	}
	r.done.Add(1)
	go func() {
		defer r.done.Done()
		defer utilruntime.HandleCrash()
		// A worker syncing one loop's parent while another loop's
		// handlers still get their initial list would see those parents
		// queued again by their children's Adds (see parentLoop.waitForHandlers).
		for _, pc := range r.pcs {
			select {
			case <-ctx.Done():
				return
			case <-pc.synced:
			}
		}
		for i := 0; i < r.workers; i++ {
			r.done.Add(1)
			go func() {
				defer r.done.Done()
				wait.UntilWithContext(ctx, func(ctx context.Context) { r.runWorker(ctx, syncs) }, time.Second)
			}()
		}
	}()
}

// Stop ends the workers, then the parent loops. A sync in flight goes on
// for up to the stop grace, and Stop waits for it.
func (r *Run) Stop() {
	r.cancel()
	r.queue.ShutDown()
	r.done.Wait()
	r.cancelSyncs()
	for _, pc := range r.pcs {
		pc.stop()
	}
}

// runWorker syncs parents until ctx, the loop's, ends; each sync runs in
// syncs (lingering).
func (r *Run) runWorker(ctx, syncs context.Context) {
	for r.processNext(ctx, syncs) {
	}
}

func (r *Run) processNext(ctx, syncs context.Context) bool {
	qkey, shutdown := r.queue.Get()
	if shutdown {
		return false
	}
	defer r.queue.Done(qkey)
	// A queue shut down still hands out what it holds: no sync begins
	// once the loop has stopped.
	if ctx.Err() != nil {
		return false
	}
	pc, key := r.route(qkey)
	if pc == nil {
		r.queue.Forget(qkey)
		return true
	}
	pc.process(syncs, qkey, key)
	return true
}

// lingering is the context of a loop's syncs: ctx's values, ending grace
// after ctx ends (or at cancel). A sync in flight when the loop stops
// finishes its hook call and its writes, rather than abandoning a call the
// hook goes on with while the parent's next owner calls it again.
func lingering(ctx context.Context, grace time.Duration) (context.Context, context.CancelFunc) {
	syncs, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stop := context.AfterFunc(ctx, func() {
		timer := time.AfterFunc(grace, cancel)
		context.AfterFunc(syncs, func() { timer.Stop() })
	})
	return syncs, func() {
		stop()
		cancel()
	}
}

// routedShards is shards asked about the parent of a queue's key: a
// parent's shard is that of its namespace/name whatever the controller's
// kind or the resource's view.
func routedShards(shards syncgate.ParentShards, route func(qkey string) (*parentLoop, string)) syncgate.ParentShards {
	if shards == nil {
		return nil
	}
	return parentKeyShards{ParentShards: shards, route: route}
}

type parentKeyShards struct {
	syncgate.ParentShards
	route func(qkey string) (*parentLoop, string)
}

func (s parentKeyShards) Owns(qkey string) bool {
	_, key := s.route(qkey)
	return s.ParentShards.Owns(key)
}

func (s parentKeyShards) Begin(ctx context.Context, qkey string) (context.Context, func(), bool) {
	_, key := s.route(qkey)
	return s.ParentShards.Begin(ctx, key)
}
