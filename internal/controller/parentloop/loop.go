package parentloop

import (
	"cmp"
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/composite-apiserver/composite-apiserver/internal/controller/sharedinformers"
	"github.com/composite-apiserver/composite-apiserver/internal/engine"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"github.com/composite-apiserver/composite-apiserver/internal/controller/eventbudget"
	"github.com/composite-apiserver/composite-apiserver/internal/controller/expectations"
	"github.com/composite-apiserver/composite-apiserver/internal/controller/syncgate"
	"github.com/composite-apiserver/composite-apiserver/internal/definition"
	"github.com/composite-apiserver/composite-apiserver/internal/hooks"
	"github.com/composite-apiserver/composite-apiserver/internal/reconcile"
	"github.com/composite-apiserver/composite-apiserver/internal/rights"
	"github.com/composite-apiserver/composite-apiserver/pkg/hookapi"
)

// parentLoop runs one controller on one parent resource (a
// CompositeController's, or one of a DecoratorController's resources): it
// syncs each of its parents with the one reconcile step the loop shares
// with /sync.
type parentLoop struct {
	cfg *Config
	// owner is the controller as written, for Events; key names it in the
	// manager's queue, metrics and logs.
	owner runtime.Object
	key   string
	rec   *reconcile.Controller
	// parentGVK and namespaced describe the parent resource.
	parentGVK  schema.GroupVersionKind
	namespaced bool
	hooks      *hooks.ControllerHooks
	// wanted tells the parent updates the loop syncs for (updatesOf).
	wanted    updatePredicate
	customize *customizeCache
	workers   int
	// actor is whom the loop acts as for this controller.
	actor *rights.Actor
	// revision, during a rollout, is which parents this revision of the
	// controller syncs; nil for all of them.
	revision atomic.Pointer[Revision]

	parents  informers.GenericInformer
	children map[schema.GroupVersionResource]informers.GenericInformer

	relatedMu sync.Mutex
	related   map[schema.GroupVersionResource]informers.GenericInformer
	// unlisted are the related resources whose informer has not listed
	// them yet, with a goroutine waiting to requeue their parents.
	unlisted map[schema.GroupVersionResource]bool

	handlers []handlerRegistration
	// acquired are the shared informers this controller uses, once per
	// use; guarded by relatedMu once the workers run.
	acquired []schema.GroupVersionResource
	// queue is the controller's one queue, shared by all its parent loops
	// (Run); view prefixes this loop's parent keys in it, and
	// shards admits them.
	queue  workqueue.TypedRateLimitingInterface[string]
	view   string
	shards syncgate.ParentShards
	// synced is closed once this loop's handlers have had the initial
	// list: the controller's workers wait for all its loops'.
	synced chan struct{}
	// expectations tell the watch events of the loop's own writes (their
	// echoes) from others'.
	expectations *expectations.Expectations
	// encodings keep each parent's observed children as its last hook
	// request encoded them, for its next sync.
	encodings hookapi.EncodingCache
	status    Status
	// childEvents is the controller's budget of Events about children,
	// which its parent loops share; nil records every one.
	childEvents *eventbudget.Budget
	// writesStatus: this loop runs the status tracker it shares with its
	// controller's other parent loops.
	writesStatus bool
	// cancel ends the loop's context: stop.
	cancel context.CancelFunc
	done   sync.WaitGroup
}

type handlerRegistration struct {
	informer cache.SharedIndexInformer
	reg      cache.ResourceEventHandlerRegistration
}

// newParentLoop makes the loop of def, one parent view of the
// controller owner (definition.Parents), that reports to status.
func newParentLoop(ctx context.Context, cfg *Config, key string, owner runtime.Object, def *definition.Definition, status Status) (*parentLoop, error) {
	mapper := cfg.Discovery
	pc := &parentLoop{
		cfg:          cfg,
		owner:        owner,
		key:          key,
		status:       status,
		parentGVK:    def.Parent.Kind,
		namespaced:   def.Parent.Namespaced,
		children:     map[schema.GroupVersionResource]informers.GenericInformer{},
		related:      map[schema.GroupVersionResource]informers.GenericInformer{},
		unlisted:     map[schema.GroupVersionResource]bool{},
		workers:      cfg.Workers,
		synced:       make(chan struct{}),
		expectations: expectations.New(cmp.Or(cfg.EchoTimeout, DefaultEchoTimeout), !def.IgnoreOwnChildWrites, !def.IgnoreOwnStatusWrites),
	}
	if def.Workers != 0 {
		pc.workers = def.Workers
	}
	if err := def.Parent.Err; err != nil {
		return nil, fmt.Errorf("parent resource %s (%s) is %w: %v", def.Parent.GVR.GroupResource(), def.Parent.GVR.Version, ErrNotServed, err)
	}
	for _, child := range def.Children {
		if err := child.Err; err != nil {
			return nil, fmt.Errorf("child resource %s (%s) is %w: %v", child.GVR.GroupResource(), child.GVR.Version, ErrNotServed, err)
		}
	}
	hasStatus, err := mapper.HasSubresource(def.Parent.GVR, "status")
	if err != nil {
		return nil, err
	}
	if !hasStatus && def.Kind == definition.KindComposite {
		return nil, &NoStatusError{GVR: def.Parent.GVR}
	}
	if !hasStatus {
		// A decorated object's status, if any, goes with the object.
		def = def.WithoutStatusRights()
	}
	if pc.actor, err = cfg.Identity.ActorFor(ctx, def); err != nil {
		return nil, err
	}
	checker := rights.Checker{Kube: cfg.Kube}
	if missing, err := checker.MissingOf(ctx, rights.ServerRights(def, pc.actor.Clients != nil)); err != nil {
		return nil, err
	} else if len(missing) > 0 {
		return nil, &ForbiddenError{Message: rights.Describe(def.Name, missing)}
	}
	if pc.hooks, err = hooks.Build(ctx, def, hooks.SecretsAs(pc.actor.Kube(), cfg.Secrets), cfg.HookDestinations); err != nil {
		return nil, Forbidden(err)
	}
	h := pc.hooks.Hooks
	if h.Customize != nil {
		pc.customize = newCustomizeCache(h.Customize, def.Hooks.Customize.Version)
		h.Customize = pc.customize
	}
	pc.wanted = updatesOf(def)
	pc.rec = &reconcile.Controller{Def: def, Hooks: h, FinalizeGrace: cfg.FinalizeGrace, ParentWithoutStatus: !hasStatus}
	return pc, nil
}

// enqueue queues the parent of key in the controller's queue.
func (pc *parentLoop) enqueue(key string) {
	pc.queue.Add(queueKey(pc.view, key))
}

// unsynced tells whether the loop has not yet synced the parent's current
// spec: its status.observedGeneration is not its generation. Such parents
// are served first (see lanes).
func (pc *parentLoop) unsynced(key string) bool {
	if pc.parents == nil {
		return false
	}
	obj, exists, err := pc.parents.Informer().GetIndexer().GetByKey(key)
	if err != nil || !exists {
		return false
	}
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return false
	}
	observed, _, _ := unstructured.NestedInt64(u.Object, "status", "observedGeneration")
	return observed != u.GetGeneration()
}

// start wires the informers and runs the loop's own goroutines until stop;
// the controller's workers are Run's.
func (pc *parentLoop) start(parent context.Context) {
	ctx, cancel := context.WithCancel(parent)
	pc.cancel = cancel
	pc.watch()
	pc.event("Starting", "Starting controller: ")
	pc.done.Add(1)
	go func() {
		defer pc.done.Done()
		defer utilruntime.HandleCrash()
		klog.FromContext(ctx).Info("Starting controller", "parent", pc.rec.Def.Parent.GVR.String(), "children", len(pc.rec.Def.Children), "workers", pc.workers)
		if !pc.waitForHandlers(ctx) {
			return
		}
		close(pc.synced)
		pc.status.Started(fmt.Sprintf("informers synced, %d workers running", pc.workers))
		if period := pc.cfg.ResyncPeriod; period > 0 {
			pc.goUntilDone(func() { pc.resync(ctx, period) })
		}
		if pc.customize != nil {
			pc.goUntilDone(func() { wait.UntilWithContext(ctx, pc.releaseUnusedRelated, relatedSweepPeriod) })
		}
		if pc.writesStatus {
			pc.status.Run(ctx)
		}
	}()
}

// watch takes the informers of the parent and child resources and adds
// the loop's handlers to them.
func (pc *parentLoop) watch() {
	pc.parents = pc.acquire(pc.rec.Def.Parent.GVR)
	pc.addHandler(pc.parents.Informer(), cache.ResourceEventHandlerFuncs{
		AddFunc:    pc.enqueueParent,
		UpdateFunc: pc.updateParent,
		DeleteFunc: pc.deleteParent,
	})
	for _, gvr := range pc.rec.Def.ChildGVRs() {
		inf := pc.acquire(gvr)
		pc.children[gvr] = inf
		pc.addHandler(inf.Informer(), cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj interface{}) { pc.childChanged(nil, obj, false) },
			UpdateFunc: func(old, cur interface{}) { pc.childChanged(old, cur, false) },
			DeleteFunc: func(obj interface{}) { pc.childChanged(nil, obj, true) },
		})
	}
}

// waitForHandlers waits until the loop's handlers have had the initial
// list, and tells whether they have (not when ctx ended first). Each
// handler's own HasSynced, not the informers': a shared informer already
// synced still hands this controller's handlers the initial list one
// object at a time, and a child's Add handled after a worker synced its
// parent queued that parent again (among 10,000 converged parents, 1,103
// hook calls more on a restart).
func (pc *parentLoop) waitForHandlers(ctx context.Context) bool {
	var synced []cache.InformerSynced
	pc.relatedMu.Lock()
	for _, h := range pc.handlers {
		synced = append(synced, h.reg.HasSynced)
	}
	pc.relatedMu.Unlock()
	return cache.WaitForCacheSync(ctx.Done(), synced...)
}

// resync queues every parent every period, until ctx ends, so that hooks
// reading the world outside the cluster get called (Metacontroller's
// periodic cache flush does the same). Not at once: the initial list has
// just queued every parent, and the parents the workers had already
// synced would be synced twice (B3: 32 of 2,000 on a restart).
func (pc *parentLoop) resync(ctx context.Context, period time.Duration) {
	select {
	case <-ctx.Done():
		return
	case <-time.After(wait.Jitter(period, 0.1)):
	}
	wait.JitterUntilWithContext(ctx, func(context.Context) { pc.enqueueAll() }, period, 0.1, false)
}

// goUntilDone runs f in a goroutine that stop waits for.
func (pc *parentLoop) goUntilDone(f func()) {
	pc.done.Add(1)
	go func() {
		defer pc.done.Done()
		f()
	}()
}

// event records an Event on the controller about its loop.
func (pc *parentLoop) event(reason, message string) {
	if pc.cfg.Recorder != nil {
		pc.cfg.Recorder.Event(pc.owner, corev1.EventTypeNormal, reason, message+pc.rec.Def.Name)
	}
}

// stop ends the workers and removes this controller's handlers from the
// shared informers, which other controllers may still use.
func (pc *parentLoop) stop() {
	pc.event("Stopping", "Stopping controller: ")
	pc.cancel()
	pc.done.Wait()
	// Workers may have added handlers of related informers until now.
	pc.relatedMu.Lock()
	for _, h := range pc.handlers {
		_ = h.informer.RemoveEventHandler(h.reg)
	}
	pc.handlers = nil
	for _, gvr := range pc.acquired {
		pc.cfg.Informers.Release(gvr)
	}
	pc.acquired = nil
	pc.relatedMu.Unlock()
	pc.hooks.Close()
}

// acquire takes a use of the shared informer of gvr, given back
// when the controller stops (or, for a related resource, when no parent's
// rules name it any more).
func (pc *parentLoop) acquire(gvr schema.GroupVersionResource) informers.GenericInformer {
	pc.acquired = append(pc.acquired, gvr)
	return pc.cfg.Informers.Acquire(gvr)
}

func (pc *parentLoop) addHandler(inf cache.SharedIndexInformer, h cache.ResourceEventHandler) {
	reg, err := inf.AddEventHandler(h)
	if err != nil {
		utilruntime.HandleError(err)
		return
	}
	pc.handlers = append(pc.handlers, handlerRegistration{informer: inf, reg: reg})
}

// counts are the parents, their children, the parents mid-rollout (those
// whose Updated condition, written by a rolling update, is not True) and
// the paused ones, from the informers' caches. Children are counted by the
// controller index, parent by parent: the cost grows with this
// controller's parents and children, not with every object of the child
// resources in the cluster (a scan of all ConfigMaps every few seconds was
// 8% of the server's CPU among 2,000 parents' children).
func (pc *parentLoop) counts() Counts {
	var n Counts
	for _, obj := range pc.parents.Informer().GetStore().List() {
		u := obj.(*unstructured.Unstructured)
		if !pc.rec.Def.Selects(u) {
			continue
		}
		n.Parents++
		if c := engine.StatusCondition(u, engine.UpdatedCondition); c != nil && c["status"] != "True" {
			n.Rolling++
		}
		if paused(u) {
			n.Paused++
		}
		uid := string(u.GetUID())
		for _, inf := range pc.children {
			objs, err := sharedinformers.ControlledBy(inf.Informer().GetIndexer(), uid)
			if err != nil {
				continue
			}
			for _, obj := range objs {
				if pc.rec.Def.OwnsChild(obj.(*unstructured.Unstructured)) {
					n.Children++
				}
			}
		}
	}
	return n
}
