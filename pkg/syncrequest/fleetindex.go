package syncrequest

import (
	"context"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/composite-apiserver/composite-apiserver/pkg/engine"
)

// pageChildren are the children of a page's parents, as the caller may
// list them: from the loop's caches where this replica holds them, or else
// listed once per child resource and namespace, and indexed by controller.
// A page of a hundred parents in one namespace costs one list per child
// resource at most, not one per parent, and each parent's claim reads only
// its own children and the orphans, as the loop's informer indexes give
// them (engine.ChildIndex). The objects are shared by the parents' syncs,
// which only read them.
type pageChildren struct {
	lister *callerLister
	caches ChildCaches

	mu    sync.Mutex
	lists map[pageListKey]*pageList
}

type pageListKey struct {
	gvr       schema.GroupVersionResource
	namespace string
}

type pageList struct {
	once    sync.Once
	err     error
	owned   map[types.UID][]*unstructured.Unstructured
	orphans []*unstructured.Unstructured
	byName  map[string]*unstructured.Unstructured
}

func newPageChildren(lister *callerLister, caches ChildCaches) *pageChildren {
	return &pageChildren{lister: lister, caches: caches, lists: map[pageListKey]*pageList{}}
}

// cached is the loop's index of gvr, when the caller may list gvr in
// namespace and this replica caches it.
func (p *pageChildren) cached(ctx context.Context, gvr schema.GroupVersionResource, namespace string) (engine.ChildIndex, bool, error) {
	if p.caches == nil {
		return nil, false, nil
	}
	index, ok := p.caches.Children(gvr)
	if !ok {
		return nil, false, nil
	}
	if err := authorize(ctx, p.lister.authorizer, "list", gvr, namespace, ""); err != nil {
		return nil, false, err
	}
	return index, true, nil
}

// list lists gvr in namespace on first use; the parents that want it
// meanwhile wait for that one list.
func (p *pageChildren) list(ctx context.Context, gvr schema.GroupVersionResource, namespace string) (*pageList, error) {
	key := pageListKey{gvr, namespace}
	p.mu.Lock()
	l, ok := p.lists[key]
	if !ok {
		l = &pageList{}
		p.lists[key] = l
	}
	p.mu.Unlock()
	l.once.Do(func() {
		objs, err := p.lister.List(ctx, gvr, namespace, labels.Everything())
		if err != nil {
			l.err = err
			return
		}
		l.owned = map[types.UID][]*unstructured.Unstructured{}
		l.byName = make(map[string]*unstructured.Unstructured, len(objs))
		for _, obj := range objs {
			l.byName[obj.GetNamespace()+"/"+obj.GetName()] = obj
			if ref := metav1.GetControllerOfNoCopy(obj); ref != nil {
				l.owned[ref.UID] = append(l.owned[ref.UID], obj)
			} else {
				l.orphans = append(l.orphans, obj)
			}
		}
	})
	return l, l.err
}

// Candidates are the objects of gvr in namespace that owner controls, and
// the orphans.
func (p *pageChildren) Candidates(ctx context.Context, gvr schema.GroupVersionResource, namespace string, owner types.UID) ([]*unstructured.Unstructured, error) {
	if index, ok, err := p.cached(ctx, gvr, namespace); err != nil || ok {
		if err != nil {
			return nil, err
		}
		return index.Candidates(ctx, gvr, namespace, owner)
	}
	l, err := p.list(ctx, gvr, namespace)
	if err != nil {
		return nil, err
	}
	owned := l.owned[owner]
	out := make([]*unstructured.Unstructured, 0, len(owned)+len(l.orphans))
	for _, obj := range owned {
		// A controller uid is unique; its namespace is checked all the
		// same, as the ControllerRef rules want.
		if namespace == "" || obj.GetNamespace() == namespace {
			out = append(out, obj)
		}
	}
	return append(out, l.orphans...), nil
}

// Get returns the listed object of gvr called namespace/name, or nil.
func (p *pageChildren) Get(ctx context.Context, gvr schema.GroupVersionResource, namespace, name string) (*unstructured.Unstructured, error) {
	if index, ok, err := p.cached(ctx, gvr, namespace); err != nil || ok {
		if err != nil {
			return nil, err
		}
		return index.Get(ctx, gvr, namespace, name)
	}
	l, err := p.list(ctx, gvr, namespace)
	if err != nil {
		return nil, err
	}
	return l.byName[namespace+"/"+name], nil
}
