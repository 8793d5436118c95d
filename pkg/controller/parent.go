package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
	"github.com/composite-apiserver/composite-apiserver/pkg/apply"
	"github.com/composite-apiserver/composite-apiserver/pkg/hookapi"
	"github.com/composite-apiserver/composite-apiserver/pkg/hooks"
	syncengine "github.com/composite-apiserver/composite-apiserver/pkg/sync"
	"github.com/composite-apiserver/composite-apiserver/pkg/syncrequest"
)

// FinalizerPrefix names the finalizer a controller with a finalize hook puts
// on its parents, as Metacontroller does.
const FinalizerPrefix = "metacontroller.io/compositecontroller-"

// parentController runs one CompositeController: it syncs each of its
// parents with the engine and applies the plan.
type parentController struct {
	m         *Manager
	cc        *v1alpha1.CompositeController
	parentGVR schema.GroupVersionResource
	parentGVK schema.GroupVersionKind
	// namespaced tells whether parents are namespaced.
	namespaced bool
	childGVRs  []schema.GroupVersionResource
	selector   labels.Selector // parentResource.labelSelector; Everything when unset
	hooks      syncengine.Hooks
	webhooks   []*hooks.Webhook
	workers    int

	parents  informers.GenericInformer
	children map[schema.GroupVersionResource]informers.GenericInformer

	relatedMu sync.Mutex
	related   map[schema.GroupVersionResource]informers.GenericInformer

	handlers []handlerRegistration
	queue    workqueue.TypedRateLimitingInterface[string]
	status   *statusTracker
	cancel   context.CancelFunc
	done     sync.WaitGroup
}

type handlerRegistration struct {
	informer cache.SharedIndexInformer
	reg      cache.ResourceEventHandlerRegistration
}

func newParentController(ctx context.Context, m *Manager, cc *v1alpha1.CompositeController) (*parentController, error) {
	parentGV, err := schema.ParseGroupVersion(cc.Spec.ParentResource.APIVersion)
	if err != nil {
		return nil, err
	}
	pc := &parentController{
		m:         m,
		cc:        cc,
		parentGVR: parentGV.WithResource(cc.Spec.ParentResource.Resource),
		children:  map[schema.GroupVersionResource]informers.GenericInformer{},
		related:   map[schema.GroupVersionResource]informers.GenericInformer{},
		selector:  labels.Everything(),
		workers:   m.cfg.Workers,
	}
	if cc.Spec.Workers != nil {
		pc.workers = int(*cc.Spec.Workers)
	}
	if pc.parentGVK, err = m.cfg.Mapper.KindFor(pc.parentGVR); err != nil {
		return nil, fmt.Errorf("parent resource %s is not served by the target cluster: %w", pc.parentGVR, err)
	}
	mapping, err := m.cfg.Mapper.RESTMapping(pc.parentGVK.GroupKind(), pc.parentGVK.Version)
	if err != nil {
		return nil, err
	}
	pc.namespaced = mapping.Scope.Name() == meta.RESTScopeNameNamespace
	if s := cc.Spec.ParentResource.LabelSelector; s != nil {
		if pc.selector, err = metav1.LabelSelectorAsSelector(s); err != nil {
			return nil, err
		}
	}
	for _, child := range cc.Spec.ChildResources {
		gv, err := schema.ParseGroupVersion(child.APIVersion)
		if err != nil {
			return nil, err
		}
		gvr := gv.WithResource(child.Resource)
		if _, err := m.cfg.Mapper.KindFor(gvr); err != nil {
			return nil, fmt.Errorf("child resource %s is not served by the target cluster: %w", gvr, err)
		}
		pc.childGVRs = append(pc.childGVRs, gvr)
	}
	if pc.hooks, pc.webhooks, err = syncrequest.BuildHooks(ctx, cc, m.secrets); err != nil {
		return nil, err
	}
	pc.queue = workqueue.NewTypedRateLimitingQueueWithConfig(
		// Metacontroller's per-parent backoff: 5ms doubling up to 1000s.
		workqueue.NewTypedItemExponentialFailureRateLimiter[string](5*time.Millisecond, 1000*time.Second),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: "compositecontroller-" + cc.Name})
	pc.status = newStatusTracker(m, cc)
	return pc, nil
}

// start wires the informers and runs the workers until stop.
func (pc *parentController) start(parent context.Context) {
	ctx, cancel := context.WithCancel(parent)
	pc.cancel = cancel
	logger := klog.FromContext(ctx).WithValues("compositecontroller", pc.cc.Name)
	ctx = klog.NewContext(ctx, logger)

	pc.parents = pc.m.factory.ForResource(pc.parentGVR)
	pc.addHandler(pc.parents.Informer(), cache.ResourceEventHandlerFuncs{
		AddFunc:    pc.enqueueParent,
		UpdateFunc: pc.updateParent,
		DeleteFunc: pc.enqueueParent,
	})
	for _, gvr := range pc.childGVRs {
		inf := pc.m.factory.ForResource(gvr)
		pc.children[gvr] = inf
		pc.addHandler(inf.Informer(), cache.ResourceEventHandlerFuncs{
			AddFunc:    pc.childChanged,
			UpdateFunc: func(old, cur interface{}) { pc.childChanged(old); pc.childChanged(cur) },
			DeleteFunc: pc.childChanged,
		})
	}
	// Shared informers live as long as the manager, not this controller:
	// other controllers may use them.
	pc.m.factory.Start(pc.m.stopCh)

	pc.done.Add(1)
	go func() {
		defer pc.done.Done()
		defer utilruntime.HandleCrash()
		logger.Info("Starting controller", "parent", pc.parentGVR.String(), "children", len(pc.childGVRs), "workers", pc.workers)
		synced := []cache.InformerSynced{pc.parents.Informer().HasSynced}
		for _, inf := range pc.children {
			synced = append(synced, inf.Informer().HasSynced)
		}
		if !cache.WaitForCacheSync(ctx.Done(), synced...) {
			return
		}
		pc.status.setReady(true, "Running", fmt.Sprintf("informers synced, %d workers running", pc.workers))
		for i := 0; i < pc.workers; i++ {
			pc.done.Add(1)
			go func() {
				defer pc.done.Done()
				wait.UntilWithContext(ctx, pc.runWorker, time.Second)
			}()
		}
		pc.status.run(ctx, pc)
	}()
}

// stop ends the workers and removes this controller's handlers from the
// shared informers, which other controllers may still use.
func (pc *parentController) stop() {
	pc.cancel()
	pc.queue.ShutDown()
	for _, h := range pc.handlers {
		_ = h.informer.RemoveEventHandler(h.reg)
	}
	pc.done.Wait()
	for _, w := range pc.webhooks {
		w.CloseIdleConnections()
	}
}

func (pc *parentController) addHandler(inf cache.SharedIndexInformer, h cache.ResourceEventHandler) {
	reg, err := inf.AddEventHandler(h)
	if err != nil {
		utilruntime.HandleError(err)
		return
	}
	pc.handlers = append(pc.handlers, handlerRegistration{informer: inf, reg: reg})
}

func (pc *parentController) enqueueParent(obj interface{}) {
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil {
		utilruntime.HandleError(err)
		return
	}
	if u, ok := obj.(*unstructured.Unstructured); ok && !pc.selector.Matches(labels.Set(u.GetLabels())) {
		return
	}
	pc.queue.Add(key)
}

func (pc *parentController) updateParent(old, cur interface{}) {
	if ignoreStatusChanges(pc.cc) {
		o, c := old.(*unstructured.Unstructured), cur.(*unstructured.Unstructured)
		if onlyStatusChanged(o, c) {
			return
		}
	}
	pc.enqueueParent(cur)
}

// childChanged queues the parent a child belongs to; an orphan may match
// any parent in its namespace, so it queues them all.
func (pc *parentController) childChanged(obj interface{}) {
	if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tombstone.Obj
	}
	child, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return
	}
	if ref := metav1.GetControllerOfNoCopy(child); ref != nil {
		gv, err := schema.ParseGroupVersion(ref.APIVersion)
		if err != nil || gv.Group != pc.parentGVK.Group || ref.Kind != pc.parentGVK.Kind {
			return
		}
		pc.queue.Add(parentKey(child.GetNamespace(), ref.Name, pc.namespaced))
		return
	}
	pc.enqueueNamespace(child.GetNamespace())
}

func (pc *parentController) enqueueNamespace(namespace string) {
	var objs []interface{}
	if pc.namespaced && namespace != "" {
		objs, _ = pc.parents.Informer().GetIndexer().ByIndex(cache.NamespaceIndex, namespace)
	} else {
		objs = pc.parents.Informer().GetStore().List()
	}
	for _, obj := range objs {
		pc.enqueueParent(obj)
	}
}

func parentKey(namespace, name string, namespaced bool) string {
	if !namespaced || namespace == "" {
		return name
	}
	return namespace + "/" + name
}

func (pc *parentController) runWorker(ctx context.Context) {
	for pc.processNext(ctx) {
	}
}

func (pc *parentController) processNext(ctx context.Context) bool {
	key, shutdown := pc.queue.Get()
	if shutdown {
		return false
	}
	defer pc.queue.Done(key)
	logger := klog.FromContext(ctx).WithValues("parent", key)
	ctx = klog.NewContext(ctx, logger)

	start := time.Now()
	result, err := pc.sync(ctx, key)
	syncLatency.WithLabelValues(pc.cc.Name).Observe(time.Since(start).Seconds())
	pc.status.synced(err)
	var tooMany *hooks.TooManyRequestsError
	switch {
	case err == nil:
		syncsTotal.WithLabelValues(pc.cc.Name, "success").Inc()
		pc.queue.Forget(key)
		if result.requeueAfter > 0 {
			pc.queue.AddAfter(key, result.requeueAfter)
		}
	case errors.As(err, &tooMany):
		// The hook said when to come back; that is not a failure to back
		// off from.
		syncsTotal.WithLabelValues(pc.cc.Name, "throttled").Inc()
		logger.V(2).Info("Hook asked to retry later", "retryAfter", tooMany.RetryAfter)
		pc.queue.Forget(key)
		pc.queue.AddAfter(key, max(tooMany.RetryAfter, time.Second))
	default:
		syncsTotal.WithLabelValues(pc.cc.Name, "error").Inc()
		logger.Error(err, "Sync failed; retrying with backoff")
		pc.queue.AddRateLimited(key)
	}
	return true
}

// eventReasons name the Events of what a sync did to children.
var eventReasons = map[v1alpha1.SyncAction]string{
	v1alpha1.SyncActionCreate:   "ChildCreated",
	v1alpha1.SyncActionUpdate:   "ChildUpdated",
	v1alpha1.SyncActionRecreate: "ChildRecreating",
	v1alpha1.SyncActionDelete:   "ChildDeleted",
	v1alpha1.SyncActionAdopt:    "ChildAdopted",
	v1alpha1.SyncActionOrphan:   "ChildReleased",
}

type syncResult struct {
	requeueAfter time.Duration
}

// sync brings one parent's children and status to what the hook wants.
// It is level-based: it reads everything again from the informers.
func (pc *parentController) sync(ctx context.Context, key string) (syncResult, error) {
	namespace, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return syncResult{}, nil
	}
	obj, err := pc.parents.Lister().ByNamespace(namespace).Get(name)
	if !pc.namespaced {
		obj, err = pc.parents.Lister().Get(name)
	}
	if apierrors.IsNotFound(err) {
		// Gone: its children go with it through their ownerReferences.
		return syncResult{}, nil
	}
	if err != nil {
		return syncResult{}, err
	}
	parent := obj.(*unstructured.Unstructured).DeepCopy()
	if !pc.selector.Matches(labels.Set(parent.GetLabels())) {
		return syncResult{}, nil
	}
	deleting := parent.GetDeletionTimestamp() != nil
	finalizer := FinalizerPrefix + pc.cc.Name
	hasFinalizer := containsString(parent.GetFinalizers(), finalizer)
	if deleting && (pc.hooks.Finalize == nil || !hasFinalizer) {
		// Nothing to finalize: the garbage collector removes the children.
		return syncResult{}, nil
	}
	if pc.hooks.Finalize != nil && !deleting && !hasFinalizer {
		if err := pc.setFinalizer(ctx, parent, finalizer, true); err != nil {
			return syncResult{}, err
		}
		// The update event of the finalizer brings the parent back.
		return syncResult{}, nil
	}

	claimed, err := pc.claim(ctx, parent)
	if err != nil {
		return syncResult{}, err
	}
	plan, err := syncengine.Compute(ctx, syncengine.Input{
		Controller: pc.cc,
		Parent:     parent,
		Parents:    pc.parentGVR,
		Children:   claimed,
		Hooks:      pc.hooks,
		Related:    &informerRelated{pc: pc, ctx: ctx},
		Resolver:   syncengine.RESTMapperResolver(pc.m.cfg.Mapper),
	})
	pc.status.hookCalled(err)
	var tooMany *hooks.TooManyRequestsError
	switch {
	case errors.As(err, &tooMany):
		// Back-pressure, not a failure: the hook said when to come back.
		pc.m.recorder.Eventf(parent, corev1.EventTypeNormal, "HookThrottled", "the hook asked to be called again in %s", tooMany.RetryAfter)
		return syncResult{}, err
	case err != nil:
		pc.m.recorder.Eventf(parent, corev1.EventTypeWarning, "SyncError", "%v", err)
		return syncResult{}, err
	}
	for _, w := range plan.Warnings {
		pc.m.recorder.Event(parent, corev1.EventTypeWarning, "SyncWarning", w)
	}
	done, applyErr := apply.Execute(ctx, pc.m.cfg.Dynamic, pc.cc.Name, parent, plan)
	for _, d := range done {
		if d.Err != nil {
			pc.m.recorder.Eventf(parent, corev1.EventTypeWarning, "ChildError", "can't %s: %v", d, d.Err)
			continue
		}
		pc.m.recorder.Eventf(parent, corev1.EventTypeNormal, eventReasons[d.Action], "%s", d)
	}
	if plan.Finalizing {
		if plan.Response.Finalized && applyErr == nil {
			return syncResult{}, pc.setFinalizer(ctx, parent, finalizer, false)
		}
	} else if plan.Response.Status != nil || parent.Object["status"] != nil {
		if _, err := apply.ParentStatus(ctx, pc.m.cfg.Dynamic, pc.parentGVR, parent, plan.Response.Status); err != nil {
			applyErr = errors.Join(applyErr, err)
		}
	}
	if applyErr != nil {
		return syncResult{}, applyErr
	}
	result := syncResult{}
	if s := plan.Response.ResyncAfterSeconds; s > 0 {
		result.requeueAfter = time.Duration(s * float64(time.Second))
	} else if p := pc.cc.Spec.ResyncPeriodSeconds; p != nil && *p > 0 {
		result.requeueAfter = time.Duration(*p) * time.Second
	} else if plan.Finalizing {
		// Not finalized yet: ask again, as Metacontroller does.
		result.requeueAfter = 5 * time.Second
	}
	return result, nil
}

// claim finds the parent's children in the informers and sorts them the
// ControllerRef way. Before adopting orphans it reads the parent again from
// the cluster: a parent deleted or replaced since the informer saw it must
// not adopt anything.
func (pc *parentController) claim(ctx context.Context, parent *unstructured.Unstructured) (syncengine.Claimed, error) {
	selector, err := syncengine.ParentSelector(pc.cc, parent)
	if err != nil {
		pc.m.recorder.Event(parent, corev1.EventTypeWarning, "InvalidSelector", err.Error())
		return syncengine.Claimed{}, err
	}
	var candidates []*unstructured.Unstructured
	for _, gvr := range pc.childGVRs {
		objs, err := pc.children[gvr].Lister().ByNamespace(parent.GetNamespace()).List(labels.Everything())
		if parent.GetNamespace() == "" {
			objs, err = pc.children[gvr].Lister().List(labels.Everything())
		}
		if err != nil {
			return syncengine.Claimed{}, err
		}
		for _, o := range objs {
			candidates = append(candidates, o.(*unstructured.Unstructured))
		}
	}
	canAdopt := parent.GetDeletionTimestamp() == nil
	claimed := syncengine.Claim(parent, selector, candidates, canAdopt)
	if len(claimed.Adopt) > 0 {
		fresh, err := pc.resource(pc.parentGVR, parent.GetNamespace()).Get(ctx, parent.GetName(), metav1.GetOptions{})
		if err != nil || fresh.GetUID() != parent.GetUID() || fresh.GetDeletionTimestamp() != nil {
			claimed = syncengine.Claim(parent, selector, candidates, false)
		}
	}
	for _, foreign := range claimed.Foreign {
		ref := metav1.GetControllerOfNoCopy(foreign)
		pc.m.recorder.Eventf(parent, corev1.EventTypeWarning, "ErrResourceExists",
			"%s %s matches the selector but is controlled by %s %s; it is left alone", foreign.GetKind(), foreign.GetName(), ref.Kind, ref.Name)
	}
	return claimed, nil
}

// setFinalizer adds or removes the controller's finalizer. The patch
// carries the resourceVersion, so it never overwrites a change it did not
// see.
func (pc *parentController) setFinalizer(ctx context.Context, parent *unstructured.Unstructured, finalizer string, add bool) error {
	var finalizers []string
	for _, f := range parent.GetFinalizers() {
		if f != finalizer {
			finalizers = append(finalizers, f)
		}
	}
	if add {
		finalizers = append(finalizers, finalizer)
	}
	patch, err := json.Marshal(map[string]interface{}{
		"metadata": map[string]interface{}{"finalizers": finalizers, "resourceVersion": parent.GetResourceVersion()},
	})
	if err != nil {
		return err
	}
	_, err = pc.resource(pc.parentGVR, parent.GetNamespace()).Patch(ctx, parent.GetName(), types.MergePatchType, patch, metav1.PatchOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

func (pc *parentController) resource(gvr schema.GroupVersionResource, namespace string) dynamic.ResourceInterface {
	if namespace == "" {
		return pc.m.cfg.Dynamic.Resource(gvr)
	}
	return pc.m.cfg.Dynamic.Resource(gvr).Namespace(namespace)
}

// informerRelated serves a customize hook's related objects from shared
// informers, started the first time a rule names a resource; a change to a
// related object resyncs the parents in its namespace.
type informerRelated struct {
	pc  *parentController
	ctx context.Context
}

func (r *informerRelated) Related(ctx context.Context, parent *unstructured.Unstructured, rule *hookapi.RelatedResourceRule) ([]*unstructured.Unstructured, error) {
	gv, err := schema.ParseGroupVersion(rule.APIVersion)
	if err != nil {
		return nil, err
	}
	inf := r.pc.relatedInformer(r.ctx, gv.WithResource(rule.Resource))
	if !cache.WaitForCacheSync(ctx.Done(), inf.Informer().HasSynced) {
		return nil, fmt.Errorf("related %s did not sync", rule.Resource)
	}
	selector := labels.Everything()
	if rule.LabelSelector != nil {
		if selector, err = metav1.LabelSelectorAsSelector(rule.LabelSelector); err != nil {
			return nil, err
		}
	}
	namespace := rule.Namespace
	if namespace == "" {
		namespace = parent.GetNamespace()
	}
	objs, err := inf.Lister().ByNamespace(namespace).List(selector)
	if namespace == "" {
		objs, err = inf.Lister().List(selector)
	}
	if err != nil {
		return nil, err
	}
	names := map[string]bool{}
	for _, n := range rule.Names {
		names[n] = true
	}
	var out []*unstructured.Unstructured
	for _, o := range objs {
		u := o.(*unstructured.Unstructured)
		if len(names) == 0 || names[u.GetName()] {
			out = append(out, u)
		}
	}
	return out, nil
}

func (pc *parentController) relatedInformer(ctx context.Context, gvr schema.GroupVersionResource) informers.GenericInformer {
	pc.relatedMu.Lock()
	defer pc.relatedMu.Unlock()
	if inf, ok := pc.related[gvr]; ok {
		return inf
	}
	inf := pc.m.factory.ForResource(gvr)
	pc.related[gvr] = inf
	changed := func(obj interface{}) {
		if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = tombstone.Obj
		}
		if u, ok := obj.(*unstructured.Unstructured); ok {
			pc.enqueueNamespace(u.GetNamespace())
		}
	}
	pc.addHandler(inf.Informer(), cache.ResourceEventHandlerFuncs{
		AddFunc: changed, UpdateFunc: func(_, cur interface{}) { changed(cur) }, DeleteFunc: changed,
	})
	pc.m.factory.Start(pc.m.stopCh)
	return inf
}

func ignoreStatusChanges(cc *v1alpha1.CompositeController) bool {
	p := cc.Spec.ParentResource.IgnoreStatusChanges
	return p != nil && *p
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

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
