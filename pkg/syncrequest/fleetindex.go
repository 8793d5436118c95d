package syncrequest

import (
	"context"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// pageChildren are the children of a page's parents, listed once per
// child resource and namespace, as the caller may list them, and indexed by
// controller: a page of a hundred parents in one namespace costs one list
// per child resource, not one per parent, and each parent's claim reads
// only its own children and the orphans, as the loop's informer indexes
// give them (engine.ChildIndex). The objects are shared by the parents'
// syncs, which only read them.
type pageChildren struct {
	lister *callerLister

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

func newPageChildren(lister *callerLister) *pageChildren {
	return &pageChildren{lister: lister, lists: map[pageListKey]*pageList{}}
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
	l, err := p.list(ctx, gvr, namespace)
	if err != nil {
		return nil, err
	}
	return l.byName[namespace+"/"+name], nil
}
