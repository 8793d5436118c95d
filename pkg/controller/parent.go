package controller

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
	"github.com/composite-apiserver/composite-apiserver/pkg/apply"
	"github.com/composite-apiserver/composite-apiserver/pkg/controller/expectations"
	"github.com/composite-apiserver/composite-apiserver/pkg/controller/sharedinformers"
	"github.com/composite-apiserver/composite-apiserver/pkg/controller/syncgate"
	"github.com/composite-apiserver/composite-apiserver/pkg/definition"
	"github.com/composite-apiserver/composite-apiserver/pkg/hooks"
	"github.com/composite-apiserver/composite-apiserver/pkg/reconcile"
	"github.com/composite-apiserver/composite-apiserver/pkg/rights"
)

// parentController runs one controller on one parent resource (a
// CompositeController's, or one of a DecoratorController's resources): it
// syncs each of its parents with the one reconcile step the loop shares
// with /sync.
type parentController struct {
	m *Manager
	// owner is the controller as written; key names it in the manager's
	// queue, metrics and logs.
	owner controllerObject
	key   string
	rec   *reconcile.Controller
	// parentGVK and namespaced describe the parent resource.
	parentGVK  schema.GroupVersionKind
	namespaced bool
	hooks      *hooks.ControllerHooks
	customize  *customizeCache
	workers    int
	// actor is whom the loop acts as for this controller.
	actor *actor

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
	// (controllerRun); view prefixes this loop's parent keys in it, and
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
	status       *statusTracker
	// writesStatus: this loop runs the status tracker it shares with its
	// controller's other parent loops.
	writesStatus bool
	// ctx is the loop's, ended by stop.
	ctx    context.Context
	cancel context.CancelFunc
	done   sync.WaitGroup
}

type handlerRegistration struct {
	informer cache.SharedIndexInformer
	reg      cache.ResourceEventHandlerRegistration
}

// errNotServed is a resource the target cluster does not serve (yet): the
// manager retries such a controller as soon as discovery changes.
var errNotServed = errors.New("not served by the target cluster")

// newParentController makes the loop of def, one parent view of the
// controller owner (definition.Parents), that reports to status.
func newParentController(ctx context.Context, m *Manager, key string, owner controllerObject, def *definition.Definition, status *statusTracker) (*parentController, error) {
	mapper := m.cfg.Discovery
	pc := &parentController{
		m:            m,
		owner:        owner,
		key:          key,
		status:       status,
		parentGVK:    def.Parent.Kind,
		namespaced:   def.Parent.Namespaced,
		children:     map[schema.GroupVersionResource]informers.GenericInformer{},
		related:      map[schema.GroupVersionResource]informers.GenericInformer{},
		unlisted:     map[schema.GroupVersionResource]bool{},
		workers:      m.cfg.Workers,
		synced:       make(chan struct{}),
		expectations: expectations.New(cmp.Or(m.cfg.EchoTimeout, DefaultEchoTimeout), !def.IgnoreOwnChildWrites, !def.IgnoreOwnStatusWrites),
	}
	if def.Workers != 0 {
		pc.workers = def.Workers
	}
	if err := def.Parent.Err; err != nil {
		return nil, fmt.Errorf("parent resource %s (%s) is %w: %v", def.Parent.GVR.GroupResource(), def.Parent.GVR.Version, errNotServed, err)
	}
	for _, child := range def.Children {
		if err := child.Err; err != nil {
			return nil, fmt.Errorf("child resource %s (%s) is %w: %v", child.GVR.GroupResource(), child.GVR.Version, errNotServed, err)
		}
	}
	hasStatus, err := mapper.HasSubresource(def.Parent.GVR, "status")
	if err != nil {
		return nil, err
	}
	if !hasStatus && def.Kind == definition.KindComposite {
		return nil, &noStatusError{gvr: def.Parent.GVR}
	}
	if !hasStatus {
		// A decorated object's status, if any, goes with the object.
		def = def.WithoutStatusRights()
	}
	if pc.actor, err = m.actorFor(ctx, def); err != nil {
		return nil, err
	}
	checker := rights.Checker{Kube: m.cfg.Kube}
	if missing, err := checker.MissingOf(ctx, rights.ServerRights(def, pc.actor.clients != nil)); err != nil {
		return nil, err
	} else if len(missing) > 0 {
		return nil, &forbiddenError{message: rights.Describe(def.Name, missing)}
	}
	if pc.hooks, err = hooks.Build(ctx, def, pc.actor.secrets(m.secrets), m.cfg.HookDestinations); err != nil {
		return nil, forbidden(err)
	}
	h := pc.hooks.Hooks
	if h.Customize != nil {
		pc.customize = newCustomizeCache(h.Customize, def.Hooks.Customize.Version)
		h.Customize = pc.customize
	}
	pc.rec = &reconcile.Controller{Def: def, Hooks: h, FinalizeGrace: m.cfg.FinalizeGrace, ParentWithoutStatus: !hasStatus}
	return pc, nil
}

// enqueue queues the parent of key in the controller's queue.
func (pc *parentController) enqueue(key string) {
	pc.queue.Add(queueKey(pc.view, key))
}

// unsynced tells whether the loop has not yet synced the parent's current
// spec: its status.observedGeneration is not its generation. Such parents
// are served first (see lanes).
func (pc *parentController) unsynced(key string) bool {
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

// noStatusError is a parent resource without a status subresource, which
// Metacontroller does not run a controller for: every sync ends in a
// status write.
type noStatusError struct{ gvr schema.GroupVersionResource }

func (e *noStatusError) Error() string {
	return fmt.Sprintf("parent resource %s (%s) has no status subresource: enable it (subresources: {status: {}} in its CRD) so that the hook's status can be written", e.gvr.GroupResource(), e.gvr.Version)
}

// forbiddenError says which rights the server lacks to run a controller.
type forbiddenError struct{ message string }

func (e *forbiddenError) Error() string { return e.message }

// start wires the informers and runs the loop's own goroutines until stop;
// the controller's workers are controllerRun's.
func (pc *parentController) start(parent context.Context) {
	ctx, cancel := context.WithCancel(parent)
	pc.cancel = cancel
	logger := klog.FromContext(ctx)

	pc.ctx = ctx
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

	pc.m.event(pc.owner, "Normal", "Starting", "Starting controller: "+pc.owner.GetName())
	pc.done.Add(1)
	go func() {
		defer pc.done.Done()
		defer utilruntime.HandleCrash()
		logger.Info("Starting controller", "parent", pc.rec.Def.Parent.GVR.String(), "children", len(pc.rec.Def.Children), "workers", pc.workers)
		// Each handler's own HasSynced, not the informers': a shared
		// informer already synced still hands this controller's handlers
		// the initial list one object at a time, and a child's Add handled
		// after a worker synced its parent queued that parent again (among
		// 10,000 converged parents, 1,103 hook calls more on a restart).
		var synced []cache.InformerSynced
		pc.relatedMu.Lock()
		for _, h := range pc.handlers {
			synced = append(synced, h.reg.HasSynced)
		}
		pc.relatedMu.Unlock()
		if !cache.WaitForCacheSync(ctx.Done(), synced...) {
			return
		}
		close(pc.synced)
		pc.status.started(fmt.Sprintf("informers synced, %d workers running", pc.workers))
		if period := pc.m.cfg.ResyncPeriod; period > 0 {
			pc.done.Add(1)
			go func() {
				defer pc.done.Done()
				// Every parent now and then, so that hooks reading the
				// world outside the cluster get called (Metacontroller's
				// periodic cache flush does the same). Not at once: the
				// initial list has just queued every parent, and the
				// parents the workers had already synced would be synced
				// twice (B3: 32 of 2,000 on a restart).
				select {
				case <-ctx.Done():
					return
				case <-time.After(wait.Jitter(period, 0.1)):
				}
				wait.JitterUntilWithContext(ctx, func(context.Context) { pc.enqueueAll() }, period, 0.1, false)
			}()
		}
		if pc.customize != nil {
			pc.done.Add(1)
			go func() {
				defer pc.done.Done()
				wait.UntilWithContext(ctx, pc.releaseUnusedRelated, relatedSweepPeriod)
			}()
		}
		if pc.writesStatus {
			pc.status.run(ctx)
		}
	}()
}

// stop ends the workers and removes this controller's handlers from the
// shared informers, which other controllers may still use.
func (pc *parentController) stop() {
	pc.m.event(pc.owner, "Normal", "Stopping", "Stopping controller: "+pc.owner.GetName())
	pc.cancel()
	pc.done.Wait()
	// Workers may have added handlers of related informers until now.
	pc.relatedMu.Lock()
	for _, h := range pc.handlers {
		_ = h.informer.RemoveEventHandler(h.reg)
	}
	pc.handlers = nil
	for _, gvr := range pc.acquired {
		pc.m.pool.Release(gvr)
	}
	pc.acquired = nil
	pc.relatedMu.Unlock()
	pc.hooks.Close()
}

// acquire takes a use of the shared informer of gvr, given back
// when the controller stops (or, for a related resource, when no parent's
// rules name it any more).
func (pc *parentController) acquire(gvr schema.GroupVersionResource) informers.GenericInformer {
	pc.acquired = append(pc.acquired, gvr)
	return pc.m.pool.Acquire(gvr)
}

func (pc *parentController) addHandler(inf cache.SharedIndexInformer, h cache.ResourceEventHandler) {
	reg, err := inf.AddEventHandler(h)
	if err != nil {
		utilruntime.HandleError(err)
		return
	}
	pc.handlers = append(pc.handlers, handlerRegistration{informer: inf, reg: reg})
}

// enqueueParent queues a parent the controller syncs: one that matches the
// label selector, or that carries the finalizer and so still needs its
// finalize hook.
func (pc *parentController) enqueueParent(obj interface{}) {
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil {
		utilruntime.HandleError(err)
		return
	}
	if u, ok := obj.(*unstructured.Unstructured); ok && !pc.rec.Def.Selects(u) &&
		!definition.HasFinalizer(u, pc.rec.Def.Finalizer) {
		return
	}
	pc.enqueue(key)
}

func (pc *parentController) updateParent(old, cur interface{}) {
	c, ok := cur.(*unstructured.Unstructured)
	if !ok {
		pc.enqueueParent(cur)
		return
	}
	wanted := !pc.rec.Def.IgnoreStatusChanges || !pc.ignoredChange(old.(*unstructured.Unstructured), c)
	key, err := cache.MetaNamespaceKeyFunc(c)
	if err != nil {
		utilruntime.HandleError(err)
		return
	}
	if pc.expectations.ParentObserved(key, c.GetResourceVersion(), wanted) {
		pc.enqueueParent(cur)
	}
}

func (pc *parentController) deleteParent(obj interface{}) {
	if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tombstone.Obj
	}
	if u, ok := obj.(*unstructured.Unstructured); ok && pc.customize != nil {
		pc.customize.forget(u.GetUID())
	}
	if key, err := cache.MetaNamespaceKeyFunc(obj); err == nil {
		pc.expectations.Forget(key)
	}
	pc.enqueueParent(obj)
}

func (pc *parentController) enqueueAll() {
	pc.enqueueWhere(func(string) bool { return true })
}

// enqueueWhere queues the parents whose key is in: those of shards this
// replica gained.
func (pc *parentController) enqueueWhere(in func(key string) bool) {
	if pc.parents == nil {
		return
	}
	for _, obj := range pc.parents.Informer().GetStore().List() {
		if key, err := cache.MetaNamespaceKeyFunc(obj); err == nil && in(key) {
			pc.enqueueParent(obj)
		}
	}
}

// childChanged queues the parent a child belongs to, unless the event is
// the echo of the loop's own write (the expectations); an orphan may match any
// parent in its namespace, so it queues them all. old is the child before
// an update, nil for an addition or a deletion (gone).
func (pc *parentController) childChanged(old, obj interface{}, gone bool) {
	if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tombstone.Obj
	}
	child, ok := obj.(*unstructured.Unstructured)
	if !ok || !pc.rec.Def.OwnsChild(child) {
		// Not the controller's to claim (another decorator's attachment).
		if old != nil {
			pc.childChanged(nil, old, false)
		}
		return
	}
	key, owned := pc.controllerKey(child)
	if o, ok := old.(*unstructured.Unstructured); ok {
		// A child that changed controller, or lost one, concerns its
		// former parent too: not as an echo.
		if oldKey, oldOwned := pc.controllerKey(o); oldKey != key || oldOwned != owned {
			pc.childChanged(nil, o, false)
		}
	}
	if owned {
		if key == "" {
			return
		}
		gv, _ := schema.ParseGroupVersion(child.GetAPIVersion())
		id := expectations.Child{Group: gv.Group, Kind: child.GetKind(), Namespace: child.GetNamespace(), Name: child.GetName()}
		if pc.expectations.ChildObserved(key, id, child.GetResourceVersion(), gone, child.GetDeletionTimestamp() != nil) {
			pc.enqueue(key)
		}
		return
	}
	var objs []interface{}
	if pc.namespaced && child.GetNamespace() != "" {
		objs, _ = pc.parents.Informer().GetIndexer().ByIndex(cache.NamespaceIndex, child.GetNamespace())
	} else {
		objs = pc.parents.Informer().GetStore().List()
	}
	for _, obj := range objs {
		pc.enqueueParent(obj)
	}
}

// controllerKey is the key of the parent that controls child, with owned
// true when it has a controller at all; the key is "" when the controller
// is not of this loop's parent kind.
func (pc *parentController) controllerKey(child *unstructured.Unstructured) (key string, owned bool) {
	ref := metav1.GetControllerOfNoCopy(child)
	if ref == nil {
		return "", false
	}
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil || gv.Group != pc.parentGVK.Group || ref.Kind != pc.parentGVK.Kind {
		return "", true
	}
	return parentKey(child.GetNamespace(), ref.Name, pc.namespaced), true
}

func parentKey(namespace, name string, namespaced bool) string {
	if !namespaced || namespace == "" {
		return name
	}
	return namespace + "/" + name
}

// process syncs the parent of key, taken from the controller's queue as
// qkey (controllerRun.processNext), and queues it again as the sync says.
func (pc *parentController) process(ctx context.Context, qkey, key string) {
	ctx, done, ok := syncgate.Admit(ctx, pc.shards, pc.queue, qkey)
	if !ok {
		return
	}
	defer done()
	give, err := pc.m.cfg.Gate.Turn(ctx, pc.rec.Def.Parent.GVR.GroupResource(), key)
	if err != nil {
		// The loop stops, or the shard was lost, while a live /sync of
		// the parent ran.
		return
	}
	defer give()
	logger := klog.FromContext(ctx).WithValues("parent", key)
	if pc.view != "" {
		logger = logger.WithValues("resource", pc.view)
	}
	ctx = klog.NewContext(ctx, logger)

	start := time.Now()
	deferredLast := pc.expectations.Begin(key)
	requeueAfter, writes, err := pc.sync(ctx, key, !deferredLast)
	if err != nil {
		writes = nil
	}
	if again, waiting := pc.expectations.Finish(key, writes); again {
		pc.enqueue(key)
	} else if waiting {
		pc.checkExpectations(key)
	}
	syncLatency.WithLabelValues(pc.key).Observe(time.Since(start).Seconds())
	if cause := context.Cause(ctx); err != nil && cause != nil && !errors.Is(cause, context.Canceled) {
		// The shard was lost mid-sync (admit): its next owner syncs the
		// parent again. Not the hook's failure, nor the controller's.
		logger.Info("Sync abandoned: this replica no longer owns the parent's shard", "cause", cause)
		pc.queue.Forget(qkey)
		return
	}
	pc.status.synced(err)
	var tooMany *hooks.TooManyRequestsError
	switch {
	case err == nil:
		syncsTotal.WithLabelValues(pc.key, "success").Inc()
		pc.queue.Forget(qkey)
		if requeueAfter > 0 {
			pc.queue.AddAfter(qkey, requeueAfter)
		}
	case errors.As(err, &tooMany):
		// The hook said when to come back; that is not a failure to back
		// off from.
		syncsTotal.WithLabelValues(pc.key, "throttled").Inc()
		logger.V(2).Info("Hook asked to retry later", "retryAfter", tooMany.RetryAfter)
		pc.queue.Forget(qkey)
		pc.queue.AddAfter(qkey, max(tooMany.RetryAfter, time.Second))
	default:
		syncsTotal.WithLabelValues(pc.key, "error").Inc()
		logger.Error(err, "Sync failed; retrying with backoff")
		pc.queue.AddRateLimited(qkey)
	}
}

// checkExpectations queues the parent of key if the echoes of its sync's writes
// have not all arrived within the echo timeout.
func (pc *parentController) checkExpectations(key string) {
	time.AfterFunc(pc.expectations.Timeout(), func() {
		if pc.ctx.Err() == nil && pc.expectations.Expire(key) {
			pc.enqueue(key)
		}
	})
}

// DefaultEchoTimeout is how long the loop waits for the echo of one of its
// writes before it syncs the parent anyway (Config.EchoTimeout). Watch
// events normally arrive within milliseconds; a lost one is a watch that
// relisted past it.
const DefaultEchoTimeout = time.Minute

// sync runs the shared reconcile step for the parent of key, read from the
// informer: level-based, it reads everything again on every sync. It
// returns the writes it made (for the expectations). mayDefer lets it leave the
// status to the sync that follows the echoes of its child writes.
func (pc *parentController) sync(ctx context.Context, key string, mayDefer bool) (time.Duration, *expectations.Writes, error) {
	namespace, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return 0, nil, nil
	}
	var obj interface{}
	if pc.namespaced {
		obj, err = pc.parents.Lister().ByNamespace(namespace).Get(name)
	} else {
		obj, err = pc.parents.Lister().Get(name)
	}
	if apierrors.IsNotFound(err) {
		// Gone: its children go with it through their ownerReferences.
		pc.expectations.Forget(key)
		return 0, nil, nil
	}
	if err != nil {
		return 0, nil, err
	}
	parent := obj.(*unstructured.Unstructured).DeepCopy()
	if !pc.rec.Def.Handles(parent) {
		// A child's ownerReference queued a parent another controller
		// of the same resource handles: reconcile skips it, and nothing
		// of it may be checked or said here.
		return 0, nil, nil
	}
	if err := pc.checkActor(ctx, parent); err != nil {
		pc.status.authorized(err)
		pc.m.recorder.Event(parent, corev1.EventTypeWarning, "Forbidden", err.Error())
		return 0, nil, err
	}
	lister := sharedinformers.NewLister(pc.children, pc.relatedInformer)
	related := &rights.RelatedLister{ObjectLister: lister, Access: pc.m.access, Subjects: pc.actor.readers}
	client, meta := pc.m.cfg.Dynamic, pc.m.cfg.Metadata
	if c := pc.actor.clients; c != nil {
		client, meta = c.Dynamic, c.Metadata
	}
	res, err := pc.rec.Sync(ctx, reconcile.Env{
		Client:    client,
		Metadata:  meta,
		Resolver:  definition.RESTMapperResolver(pc.m.cfg.Discovery),
		Children:  lister,
		Index:     lister,
		Related:   related,
		Recorder:  pc.m.recorder,
		Revisions: reconcile.ClientRevisions{Client: client},
		// A nil *Schemas must stay a nil interface.
		Ownership: pc.m.ownership(),
	}, parent, reconcile.Options{StatusAfterChildEchoes: mayDefer && !pc.rec.Def.IgnoreOwnChildWrites})
	if res.Plan != nil || err != nil {
		pc.status.hookCalled(err)
	}
	var refused *rights.ForbiddenError
	switch {
	case errors.As(err, &refused):
		// A related list refused: the sync stopped before the sync hook,
		// so that no child is deleted for want of what it was made from.
		msg := "sync hook not called, nothing changed: " + refused.Error()
		pc.status.authorized(errors.New(msg))
		pc.m.recorder.Event(parent, corev1.EventTypeWarning, "RelatedForbidden", msg)
	case apierrors.IsForbidden(err):
		pc.status.authorized(err)
	case err == nil:
		pc.status.authorized(nil)
	}
	if pc.m.unchanged != nil {
		for _, d := range res.Done {
			if d.Err == nil {
				pc.m.unchanged.Applied(d.Stored.Body, d.Stored.UID, d.Stored.ResourceVersion, pc.rec.Def.FieldManager)
			}
		}
	}
	writes := writesOf(res.Done, res.ParentWrites)
	writes.StatusDeferred = res.StatusDeferred
	if err != nil {
		return 0, writes, err
	}
	return res.RequeueAfter, writes, nil
}

// checkActor refuses a sync its identity could not make: one whose
// ServiceAccount is gone, or that may not list the parent's or children's
// resources in the parent's namespace.
func (pc *parentController) checkActor(ctx context.Context, parent *unstructured.Unstructured) error {
	sa := pc.actor.subject.ServiceAccount
	if sa == nil {
		return nil
	}
	if err := pc.m.serviceAccounts.exists(ctx, *sa); err != nil {
		return err
	}
	return pc.m.access.CheckReads(ctx, pc.actor.subject, pc.rec.Def, parent.GetNamespace())
}

// onlyStatusChanged tells whether two versions of a parent differ in
// nothing but status and bookkeeping metadata.
func onlyStatusChanged(old, cur *unstructured.Unstructured) bool {
	strip := func(u *unstructured.Unstructured) map[string]interface{} {
		c := u.DeepCopy().Object
		delete(c, "status")
		if m, ok := c["metadata"].(map[string]interface{}); ok {
			delete(m, "resourceVersion")
			delete(m, "managedFields")
		}
		return c
	}
	return equality.Semantic.DeepEqual(strip(old), strip(cur))
}

// writesOf are the writes, for the expectations, of a sync's done children whose echoes the loop
// can tell (apply.Done.Wrote: creates and updates by the resourceVersion
// stored, deletions by the child's name), and its parent writes.
func writesOf(done []apply.Done, parent []reconcile.ParentWrite) *expectations.Writes {
	w := &expectations.Writes{}
	for _, p := range parent {
		if p.ResourceVersion != "" {
			w.Parent = append(w.Parent, expectations.ParentWrite{ResourceVersion: p.ResourceVersion, Answer: p.Answer})
		}
	}
	for _, d := range done {
		if !d.Wrote() {
			continue
		}
		child := expectations.Child{Group: d.GVR.Group, Kind: d.Kind, Namespace: d.Namespace, Name: d.Name}
		if d.Action == v1alpha1.SyncActionCreate || d.Action == v1alpha1.SyncActionUpdate {
			w.Children = append(w.Children, expectations.ChildWrite{Child: child, ResourceVersion: d.Stored.ResourceVersion})
		} else {
			w.Children = append(w.Children, expectations.ChildWrite{Child: child})
		}
	}
	return w
}
