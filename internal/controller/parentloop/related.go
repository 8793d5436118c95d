package parentloop

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
	"github.com/composite-apiserver/composite-apiserver/internal/definition"
	"github.com/composite-apiserver/composite-apiserver/internal/engine"
	"github.com/composite-apiserver/composite-apiserver/pkg/hookapi"
)

// customizeTTL is how long a customize answer is kept, Metacontroller's
// figure: the answer may only change with the parent's generation, which is
// part of the key, so the expiry only bounds memory.
const customizeTTL = 20 * time.Minute

// relatedInformer returns the shared informer of a related resource,
// registering this controller's handler the first time, and waits for its
// first sync.
func (pc *parentLoop) relatedInformer(ctx context.Context, gvr schema.GroupVersionResource) (informers.GenericInformer, error) {
	pc.relatedMu.Lock()
	inf, ok := pc.related[gvr]
	if !ok {
		inf = pc.acquire(gvr)
		pc.related[gvr] = inf
		if gvr != definition.Namespaces {
			changed := func(obj interface{}) { pc.relatedChanged(gvr, obj) }
			pc.addHandler(inf.Informer(), cache.ResourceEventHandlerFuncs{
				AddFunc:    changed,
				UpdateFunc: func(old, cur interface{}) { changed(old); changed(cur) },
				DeleteFunc: changed,
			})
		}
	}
	pc.relatedMu.Unlock()
	// Bounded, as Metacontroller's ErrRelatedInformerNotSynced: an
	// informer that can't list never syncs, and waiting for it would hold
	// the worker for good, with nothing said anywhere. The sync fails
	// instead, at once when the list has failed, and is retried with the
	// parent's backoff; its error shows on the parent's Events and the
	// controller's status.
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, relatedSyncTimeout, true, func(context.Context) (bool, error) {
		if inf.Informer().HasSynced() {
			return true, nil
		}
		return false, pc.cfg.Informers.LastListError(gvr)
	})
	switch {
	case err == nil:
		return inf, nil
	case ctx.Err() != nil:
		return nil, ctx.Err()
	}
	pc.requeueWhenListed(ctx, gvr, inf)
	switch {
	case wait.Interrupted(err):
		return nil, fmt.Errorf("can't read related %s: its informer has not listed it after %s", gvr.GroupResource(), relatedSyncTimeout)
	default:
		return nil, fmt.Errorf("can't read related %s: %w", gvr.GroupResource(), err)
	}
}

// requeueWhenListed queues again, once the informer of gvr has listed it,
// the parents whose rules name gvr: their syncs failed waiting for it, and
// by then their backoff may be long (a right granted to the server, say,
// shows at once). One goroutine per resource waits, until ctx ends.
func (pc *parentLoop) requeueWhenListed(ctx context.Context, gvr schema.GroupVersionResource, inf informers.GenericInformer) {
	pc.relatedMu.Lock()
	defer pc.relatedMu.Unlock()
	if pc.unlisted[gvr] || pc.customize == nil {
		return
	}
	pc.unlisted[gvr] = true
	pc.done.Add(1)
	go func() {
		defer pc.done.Done()
		if cache.WaitForCacheSync(ctx.Done(), inf.Informer().HasSynced) {
			for _, parent := range pc.customize.naming(gvr) {
				pc.enqueue(parentKey(parent.Namespace, parent.Name, pc.namespaced))
			}
		}
		pc.relatedMu.Lock()
		delete(pc.unlisted, gvr)
		pc.relatedMu.Unlock()
	}()
}

// relatedSweepPeriod is how often a controller gives back the related
// informers no parent's rules name any more.
const relatedSweepPeriod = time.Minute

// releaseUnusedRelated gives back the related informers that no parent's
// customize rules name any more (a rule changed, its parents went away),
// so that a one-off rule does not keep a cluster-wide watch for as long as
// the controller runs. A rule that names the resource again acquires it
// again. The namespaces informer, which namespaceSelectors read, stays.
func (pc *parentLoop) releaseUnusedRelated(context.Context) {
	if pc.customize == nil {
		return
	}
	// Asked without relatedMu: relatedChanged takes the customize cache's
	// lock, then relatedMu.
	pc.relatedMu.Lock()
	var named []schema.GroupVersionResource
	for gvr := range pc.related {
		named = append(named, gvr)
	}
	pc.relatedMu.Unlock()
	var unused []schema.GroupVersionResource
	for _, gvr := range named {
		if gvr != definition.Namespaces && len(pc.customize.naming(gvr)) == 0 {
			unused = append(unused, gvr)
		}
	}
	pc.relatedMu.Lock()
	defer pc.relatedMu.Unlock()
	for _, gvr := range unused {
		inf, ok := pc.related[gvr]
		if !ok || pc.unlisted[gvr] {
			continue
		}
		handlers := pc.handlers[:0]
		for _, h := range pc.handlers {
			if h.informer == inf.Informer() {
				_ = h.informer.RemoveEventHandler(h.reg)
				continue
			}
			handlers = append(handlers, h)
		}
		pc.handlers = handlers
		delete(pc.related, gvr)
		if i := slices.Index(pc.acquired, gvr); i >= 0 {
			pc.acquired = slices.Delete(pc.acquired, i, i+1)
		}
		pc.cfg.Informers.Release(gvr)
	}
}

// relatedSyncTimeout bounds a sync's wait for a related resource's informer
// to list it for the first time.
const relatedSyncTimeout = 10 * time.Second

// relatedChanged queues exactly the parents whose customize rules select
// the related object that changed.
func (pc *parentLoop) relatedChanged(gvr schema.GroupVersionResource, obj interface{}) {
	if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tombstone.Obj
	}
	u, ok := obj.(*unstructured.Unstructured)
	if !ok || pc.customize == nil {
		return
	}
	namespaced := u.GetNamespace() != ""
	nsLabels := func(name string) (labels.Set, bool) {
		pc.relatedMu.Lock()
		inf, ok := pc.related[definition.Namespaces]
		pc.relatedMu.Unlock()
		if !ok {
			return nil, false
		}
		ns, err := inf.Lister().Get(name)
		if err != nil {
			return nil, false
		}
		return labels.Set(ns.(*unstructured.Unstructured).GetLabels()), true
	}
	for _, parent := range pc.customize.selecting(gvr, u, namespaced, nsLabels) {
		pc.enqueue(parentKey(parent.Namespace, parent.Name, pc.namespaced))
	}
}

// customizeCache keeps each parent's customize answer per parent UID and
// generation, as Metacontroller does, and indexes the answers' rules by
// resource so that a related object's change finds the parents it concerns
// without looking at the others.
type customizeCache struct {
	hook    hookapi.CustomizeHook
	version v1alpha1.HookVersion
	now     func() time.Time

	mu    sync.Mutex
	byUID map[types.UID]*customizeEntry
	// byResource indexes the parents whose rules name a resource.
	byResource map[schema.GroupVersionResource]map[types.UID]struct{}
}

type customizeEntry struct {
	generation int64
	expires    time.Time
	resp       *hookapi.CustomizeHookResponse
	parent     *unstructured.Unstructured // metadata only
	resources  []schema.GroupVersionResource
}

func newCustomizeCache(hook hookapi.CustomizeHook, version v1alpha1.HookVersion) *customizeCache {
	return &customizeCache{
		hook: hook, version: version, now: time.Now,
		byUID:      map[types.UID]*customizeEntry{},
		byResource: map[schema.GroupVersionResource]map[types.UID]struct{}{},
	}
}

// Customize answers from the cache when the parent's generation has been
// answered before, and calls the hook otherwise.
func (c *customizeCache) Customize(ctx context.Context, req *hookapi.CustomizeHookRequest) (*hookapi.CustomizeHookResponse, error) {
	uid, generation := req.Parent.GetUID(), req.Parent.GetGeneration()
	c.mu.Lock()
	e, ok := c.byUID[uid]
	if ok && e.generation == generation && c.now().Before(e.expires) {
		c.mu.Unlock()
		return e.resp, nil
	}
	c.mu.Unlock()
	resp, err := c.hook.Customize(ctx, req)
	if err != nil || resp == nil || uid == "" {
		return resp, err
	}
	entry := &customizeEntry{generation: generation, expires: c.now().Add(customizeTTL), resp: resp, parent: metadataOnly(req.Parent)}
	for _, rule := range resp.RelatedResourceRules {
		if rule == nil {
			continue
		}
		if gv, err := schema.ParseGroupVersion(rule.APIVersion); err == nil {
			entry.resources = append(entry.resources, gv.WithResource(rule.Resource))
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.forgetLocked(uid)
	c.byUID[uid] = entry
	for _, gvr := range entry.resources {
		if c.byResource[gvr] == nil {
			c.byResource[gvr] = map[types.UID]struct{}{}
		}
		c.byResource[gvr][uid] = struct{}{}
	}
	return resp, nil
}

func (c *customizeCache) forget(uid types.UID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.forgetLocked(uid)
}

func (c *customizeCache) forgetLocked(uid types.UID) {
	e, ok := c.byUID[uid]
	if !ok {
		return
	}
	for _, gvr := range e.resources {
		delete(c.byResource[gvr], uid)
	}
	delete(c.byUID, uid)
}

type parentRef struct{ Namespace, Name string }

// selecting returns the parents whose rules for gvr select obj.
func (c *customizeCache) selecting(gvr schema.GroupVersionResource, obj *unstructured.Unstructured, namespaced bool, nsLabels func(string) (labels.Set, bool)) []parentRef {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []parentRef
	for uid := range c.byResource[gvr] {
		e := c.byUID[uid]
		for _, rule := range e.resp.RelatedResourceRules {
			if rule == nil {
				continue
			}
			gv, err := schema.ParseGroupVersion(rule.APIVersion)
			if err != nil || gv.WithResource(rule.Resource) != gvr {
				continue
			}
			q, err := engine.NewRelatedQuery(rule, c.version, e.parent, gvr, namespaced)
			if err == nil && q.Matches(obj, nsLabels) {
				out = append(out, parentRef{Namespace: e.parent.GetNamespace(), Name: e.parent.GetName()})
				break
			}
		}
	}
	return out
}

// naming are the parents whose customize rules name gvr.
func (c *customizeCache) naming(gvr schema.GroupVersionResource) []parentRef {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]parentRef, 0, len(c.byResource[gvr]))
	for uid := range c.byResource[gvr] {
		e := c.byUID[uid]
		out = append(out, parentRef{Namespace: e.parent.GetNamespace(), Name: e.parent.GetName()})
	}
	return out
}

func metadataOnly(obj *unstructured.Unstructured) *unstructured.Unstructured {
	out := &unstructured.Unstructured{}
	out.SetAPIVersion(obj.GetAPIVersion())
	out.SetKind(obj.GetKind())
	out.SetNamespace(obj.GetNamespace())
	out.SetName(obj.GetName())
	out.SetUID(obj.GetUID())
	return out
}
